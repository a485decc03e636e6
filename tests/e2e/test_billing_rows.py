"""Every completed request has exactly one usage row, written before the final event."""

from __future__ import annotations

from typing import Any

import aiohttp

from .conftest import Gateway

MODEL = "anthropic/claude-sonnet-5-5"


async def test_non_stream_request_has_a_usage_row(gateway: Gateway) -> None:
    client = gateway.anthropic()
    raw = await client.messages.with_raw_response.create(
        model="claude-sonnet-5.5",
        max_tokens=32,
        messages=[{"role": "user", "content": "bill me [sim:tokens=6]"}],
    )
    message = await raw.parse()
    # Durable (outbox or PostgreSQL) when the body arrives; the row itself follows within ms.
    assert await gateway.record_is_durable(raw.headers["request-id"])
    row = await gateway.usage_row(raw.headers["request-id"])
    assert row is not None
    assert row["status"] == "complete"
    assert row["model"] == MODEL
    assert row["output_tokens"] == message.usage.output_tokens == 6
    assert row["input_tokens"] == message.usage.input_tokens
    assert row["deployment"] in ("sonnet-a", "sonnet-b")
    expected = -(-(row["input_tokens"] * 3_000_000 + 6 * 15_000_000) // 1_000_000)
    assert abs(row["cost_micros"] - expected) <= 1


async def test_stream_has_a_usage_row_when_message_stop_arrives(gateway: Gateway) -> None:
    client = gateway.anthropic()
    async with client.messages.stream(
        model=MODEL,
        max_tokens=32,
        messages=[{"role": "user", "content": "stream bill [sim:tokens=4]"}],
    ) as stream:
        rid = stream.response.headers["request-id"]
        async for event in stream:
            if event.type == "message_stop":
                assert await gateway.record_is_durable(rid), "message_stop before durability"
                row = await gateway.usage_row(rid)
                assert row is not None, "message_stop arrived before the usage was durable"
                assert row["output_tokens"] == 4
                assert row["status"] == "complete"


async def test_a_client_reads_its_own_usage_right_after_the_final_event(
    gateway: Gateway, new_key: Any, http: aiohttp.ClientSession
) -> None:
    """/api/usage waits for the usage outbox to drain (a read barrier): the row of a request is
    there as soon as its final event was sent, not ~50 ms later (docs/billing.md, "Queries")."""
    key = await new_key("read-own-usage")
    anthropic_client = gateway.anthropic(api_key=key)
    openai_client = gateway.openai(api_key=key)
    auth = {"x-api-key": key}
    for turn in range(4):
        if turn % 2 == 0:
            async with anthropic_client.messages.stream(
                model=MODEL,
                max_tokens=32,
                messages=[{"role": "user", "content": f"own usage {turn} [sim:tokens=3]"}],
            ) as stream:
                rid = stream.response.headers["request-id"]
                await stream.get_final_message()
        else:
            raw = await openai_client.chat.completions.with_raw_response.create(
                model=MODEL,
                max_tokens=32,
                messages=[{"role": "user", "content": f"own usage {turn} [sim:tokens=3]"}],
            )
            rid = raw.headers["request-id"]
        async with http.get(f"{gateway.url}/api/usage?limit=10", headers=auth) as r:
            assert r.status == 200
            page = await r.json()
        assert rid in [item["request_id"] for item in page["data"]], turn
        # A row whose delivery confirmation is not applied yet is pending, counted apart.
        totals = page["totals"]
        assert totals["requests"] + totals["pending_requests"] == turn + 1
