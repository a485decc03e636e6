"""Every completed request has exactly one usage row, written before the final event."""

from __future__ import annotations

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
