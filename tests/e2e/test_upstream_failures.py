"""Upstream errors, failover before the first byte, mid-stream failures and client disconnects."""

from __future__ import annotations

import asyncio
import time

import anthropic
import pytest

from .conftest import Gateway

MODEL = "anthropic/claude-sonnet-5-5"

pytestmark = pytest.mark.usefixtures("clean_sims")


async def test_failover_before_first_byte_on_529(gateway: Gateway) -> None:
    """sim-a answers 529 to everything; every request still succeeds via sim-b.

    First in this module: later tests put deployments in cooldown, which would make the router
    skip sim-a and leave failover unexercised."""
    await gateway.sim_faults(gateway.sim_a, status=529, count=-1)
    client = gateway.anthropic()
    for i in range(12):
        message = await client.messages.create(
            model=MODEL,
            max_tokens=8,
            messages=[{"role": "user", "content": f"failover {i}"}],
            extra_headers={"x-ezat-session": f"failover-session-{i}"},
        )
        assert message.content[0].type == "text"
    async with client.messages.stream(
        model=MODEL,
        max_tokens=8,
        messages=[{"role": "user", "content": "stream failover [sim:tokens=3]"}],
    ) as stream:
        final = await stream.get_final_message()
    assert final.stop_reason == "end_turn"
    hit_a = [r for r in await gateway.sim_requests(gateway.sim_a) if "failover" in str(r["body"])]
    assert hit_a, "sim-a was never tried, so failover was not exercised"


@pytest.mark.parametrize(
    ("code", "error_class", "error_type"),
    [
        (429, anthropic.RateLimitError, "rate_limit_error"),
        (500, anthropic.InternalServerError, "api_error"),
        (529, anthropic.APIStatusError, "overloaded_error"),
    ],
)
async def test_upstream_error_is_mapped_when_every_deployment_fails(
    gateway: Gateway, code: int, error_class: type[Exception], error_type: str
) -> None:
    client = gateway.anthropic()
    with pytest.raises(error_class) as info:
        await client.messages.create(
            model=MODEL,
            max_tokens=8,
            messages=[{"role": "user", "content": f"fail [sim:status={code}]"}],
        )
    err = info.value
    assert isinstance(err, anthropic.APIStatusError)
    assert err.status_code == code
    assert err.body["error"]["type"] == error_type  # type: ignore[index]
    if code in (429, 529):
        assert int(err.response.headers["retry-after"]) >= 1
    message = err.body["error"]["message"]  # type: ignore[index]
    assert "127.0.0.1" not in message and "http://" not in message
    assert await gateway.usage_row(err.response.headers["request-id"], wait=1.0) is None


async def test_failover_on_connection_refused(gateway: Gateway) -> None:
    client = gateway.anthropic()
    for i in range(8):
        message = await client.messages.create(
            model="claude-failover",
            max_tokens=8,
            messages=[{"role": "user", "content": f"dead first? {i}"}],
            extra_headers={"x-ezat-session": f"dead-{i}"},
        )
        assert message.model == "claude-failover"


async def test_mid_stream_failure_ends_with_an_error_event(gateway: Gateway) -> None:
    client = gateway.anthropic()
    texts: list[str] = []
    with pytest.raises(anthropic.APIStatusError) as info:
        async with client.messages.stream(
            model=MODEL,
            max_tokens=64,
            messages=[{"role": "user", "content": "break [sim:tokens=20] [sim:fail_after=3]"}],
        ) as stream:
            async for event in stream:
                if event.type == "content_block_delta":
                    texts.append(event.delta.text)  # type: ignore[union-attr]
    assert len(texts) == 3
    assert info.value.body["error"]["type"] == "overloaded_error"  # type: ignore[index]


async def test_upstream_connection_drop_mid_stream_ends_with_an_error(gateway: Gateway) -> None:
    client = gateway.anthropic()
    with pytest.raises(anthropic.APIStatusError) as info:
        async with client.messages.stream(
            model=MODEL,
            max_tokens=64,
            messages=[{"role": "user", "content": "drop [sim:tokens=20] [sim:drop_after=2]"}],
        ) as stream:
            async for _ in stream:
                pass
    assert info.value.body["error"]["type"] == "api_error"  # type: ignore[index]


async def test_client_disconnect_cancels_the_upstream_within_a_second(gateway: Gateway) -> None:
    client = gateway.anthropic()
    rid = f"disconnect-{time.time_ns()}"
    got = 0
    async with client.messages.stream(
        model=MODEL,
        max_tokens=500,
        messages=[{"role": "user", "content": "long [sim:tokens=300] [sim:token_ms=50]"}],
        extra_headers={"x-request-id": rid},
    ) as stream:
        async for event in stream:
            if event.type == "content_block_delta":
                got += 1
                if got == 3:
                    break
    closed_at = time.time()
    assert got == 3
    record = None
    for _ in range(30):
        seen = await gateway.sim_requests(gateway.sim_a) + await gateway.sim_requests(gateway.sim_b)
        record = next((r for r in seen if r["headers"].get("x-request-id") == rid), None)
        if record and record["outcome"] != "active" and record.get("finished_at"):
            break
        await asyncio.sleep(0.1)
    assert record is not None
    assert record["outcome"] == "cancelled", record
    assert record["finished_at"] - closed_at < 1.0
    assert record["tokens_sent"] < 100
