"""Upstream misbehaviour that is not an error answer (issue 13: "nothing hangs, nothing is
lost"), through the whole stack with the official SDKs: a connection never answered, headers
then silence, a stream that stops without message_stop and keeps its connection open, a 200 HTML
page. The client gets a clean error within the configured bounds (this stack: stream first byte
3 s, first byte 8 s, between events 6 s; conftest.py), or the answer of the live deployment when
nothing was sent yet; a request that produced no answer leaves no usage row, and a stream that
broke mid-way leaves a `failed` row that costs nothing (docs/billing.md)."""

from __future__ import annotations

import time
from typing import Any

import anthropic
import openai
import pytest
from ezat_router.core.selection import rendezvous_score

from .conftest import Gateway

MODEL = "anthropic/claude-sonnet-5-5"
STREAM_FIRST_BYTE = 3.0
FIRST_BYTE = 8.0
BETWEEN = 6.0
SLACK = 2.5  # a loaded 2-core machine, SDK and NATS hops

pytestmark = pytest.mark.usefixtures("clean_sims")


def homed_at_a(tag: str) -> str:
    """A fresh session key whose rendezvous home is sonnet-a (sim-a), so a fault armed on sim-a
    hits the first attempt and the failover goes to sonnet-b (sim-b)."""
    for i in range(1000):
        key = f"{tag}-{time.time_ns()}-{i}"
        if rendezvous_score(key.encode(), "sonnet-a", 1) > rendezvous_score(
            key.encode(), "sonnet-b", 1
        ):
            return key
    raise AssertionError("no key homed at sonnet-a")


async def sim_a_is_healthy(gateway: Gateway) -> None:
    """One good answer from sim-a clears its consecutive-fault count, so the faults of these tests
    never add up to an open breaker (5) that would send the next test's first attempt elsewhere."""
    client = gateway.anthropic()
    session = homed_at_a("warm")
    await client.messages.create(
        model=MODEL,
        max_tokens=4,
        messages=[{"role": "user", "content": "warm [sim:tokens=1]"}],
        extra_headers={"x-ezat-session": session},
    )


def ask(text: str, rid: str, session: str | None = None) -> dict[str, Any]:
    headers = {"x-request-id": rid}
    if session:
        headers["x-ezat-session"] = session
    return {
        "model": MODEL,
        "max_tokens": 64,
        "messages": [{"role": "user", "content": text}],
        "extra_headers": headers,
    }


async def stream_to_the_end(client: anthropic.AsyncAnthropic, **kw: Any) -> tuple[int, Any]:
    """Read a stream; the number of text deltas and the final message."""
    deltas = 0
    async with client.messages.stream(**kw) as stream:
        async for event in stream:
            if event.type == "content_block_delta":
                deltas += 1
        return deltas, await stream.get_final_message()


async def sim_a_saw(gateway: Gateway, rid: str) -> dict[str, Any]:
    for entry in await gateway.sim_requests(gateway.sim_a, 50):
        if entry["headers"].get("x-request-id") == rid:
            return entry
    raise AssertionError(f"sim-a never received {rid}")


# ---- a stream that stops mid-way and keeps its connection open ----------------------------------


async def test_stream_stalling_midway_ends_with_a_timeout_error_and_is_not_charged(
    gateway: Gateway,
) -> None:
    for sim in (gateway.sim_a, gateway.sim_b):
        await gateway.sim_faults(sim, stall_after=3, count=-1)
    client = gateway.anthropic()
    rid = f"stall-{time.time_ns()}"
    deltas = 0
    started = time.monotonic()
    with pytest.raises(anthropic.APIStatusError) as info:
        async with client.messages.stream(**ask("stall [sim:tokens=20]", rid)) as stream:
            async for event in stream:
                if event.type == "content_block_delta":
                    deltas += 1
    elapsed = time.monotonic() - started
    assert deltas == 3
    error = info.value.body["error"]  # type: ignore[index]
    assert error["type"] == "timeout_error"
    assert f"sent nothing for {BETWEEN:g} seconds" in error["message"]
    assert BETWEEN <= elapsed < BETWEEN + SLACK, elapsed
    # Started, then broke: a failed row, not billed (docs/billing.md, the seed pages).
    row = await gateway.usage_row(rid)
    assert row is not None
    assert (row["status"], row["cost_micros"]) == ("failed", 0)


async def test_openai_stream_stalling_midway_ends_with_an_error_chunk_and_is_not_charged(
    gateway: Gateway,
) -> None:
    for sim in (gateway.sim_a, gateway.sim_b):
        await gateway.sim_faults(sim, stall_after=2, count=-1)
    client = gateway.openai()
    rid = f"oa-stall-{time.time_ns()}"
    texts: list[str] = []
    started = time.monotonic()
    with pytest.raises(openai.APIError) as info:
        stream = await client.chat.completions.create(
            model=MODEL,
            max_tokens=64,
            stream=True,
            stream_options={"include_usage": True},
            messages=[{"role": "user", "content": "stall [sim:tokens=20]"}],
            extra_headers={"x-request-id": rid},
        )
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                texts.append(chunk.choices[0].delta.content)
    elapsed = time.monotonic() - started
    assert len(texts) == 2
    assert "sent nothing for" in info.value.message
    assert BETWEEN <= elapsed < BETWEEN + SLACK, elapsed
    row = await gateway.usage_row(rid)
    assert row is not None
    assert (row["status"], row["cost_micros"]) == ("failed", 0)


# ---- nothing sent yet: fail over ----------------------------------------------------------------


@pytest.mark.parametrize("fault", ["never_answer", "stall_before_start"])
async def test_stream_not_started_fails_over_within_the_stream_first_byte_bound(
    gateway: Gateway, fault: str
) -> None:
    """sim-a never answers / sends its headers and then nothing: after the stream bound (3 s,
    not first_byte_timeout's 8 s nor between_events_timeout's 6 s) sim-b answers in full."""
    await sim_a_is_healthy(gateway)
    await gateway.sim_faults(gateway.sim_a, **{fault: True})
    client = gateway.anthropic()
    rid = f"{fault}-{time.time_ns()}"
    started = time.monotonic()
    deltas, final = await stream_to_the_end(
        client, **ask("late [sim:tokens=4]", rid, homed_at_a(fault))
    )
    elapsed = time.monotonic() - started
    assert (deltas, final.stop_reason) == (4, "end_turn")
    assert STREAM_FIRST_BYTE <= elapsed < STREAM_FIRST_BYTE + SLACK, elapsed
    assert (await sim_a_saw(gateway, rid))["outcome"] == "cancelled"  # tried first, given up on
    row = await gateway.usage_row(rid)
    assert row is not None
    assert (row["status"], row["deployment"]) == ("complete", "sonnet-b")


async def test_non_stream_never_answered_fails_over_after_first_byte_timeout(
    gateway: Gateway,
) -> None:
    """A non-streamed answer's headers come with the whole answer, so its bound is the longer
    first_byte_timeout (8 s here; 600 s by default)."""
    await sim_a_is_healthy(gateway)
    await gateway.sim_faults(gateway.sim_a, never_answer=True)
    client = gateway.anthropic()
    rid = f"json-never-{time.time_ns()}"
    started = time.monotonic()
    message = await client.messages.create(**ask("late json", rid, homed_at_a("json-never")))
    elapsed = time.monotonic() - started
    assert message.stop_reason == "end_turn"
    assert FIRST_BYTE <= elapsed < FIRST_BYTE + SLACK, elapsed
    assert (await sim_a_saw(gateway, rid))["outcome"] == "cancelled"


@pytest.mark.parametrize("stream", [True, False])
async def test_a_200_html_page_fails_over_at_once(gateway: Gateway, stream: bool) -> None:
    await sim_a_is_healthy(gateway)
    await gateway.sim_faults(gateway.sim_a, html=True)
    client = gateway.anthropic()
    rid = f"html-{stream}-{time.time_ns()}"
    kw = ask("page [sim:tokens=3]", rid, homed_at_a("html"))
    started = time.monotonic()
    if stream:
        _, final = await stream_to_the_end(client, **kw)
    else:
        final = await client.messages.create(**kw)
    assert time.monotonic() - started < SLACK
    assert final.stop_reason == "end_turn"
    assert (await sim_a_saw(gateway, rid))["outcome"] == "html"
    row = await gateway.usage_row(rid)
    assert row is not None and row["deployment"] == "sonnet-b"


# ---- nothing usable anywhere --------------------------------------------------------------------


@pytest.mark.parametrize("stream", [True, False])
async def test_html_from_every_deployment_is_a_clean_error_and_no_row(
    gateway: Gateway, stream: bool
) -> None:
    await sim_a_is_healthy(gateway)
    for sim in (gateway.sim_a, gateway.sim_b):
        await gateway.sim_faults(sim, html=True, count=-1)
    client = gateway.anthropic()
    rid = f"html-all-{stream}-{time.time_ns()}"
    with pytest.raises(anthropic.InternalServerError) as info:
        if stream:
            await stream_to_the_end(client, **ask("page", rid))
        else:
            await client.messages.create(**ask("page", rid))
    error = info.value.body["error"]  # type: ignore[index]
    assert error["type"] == "api_error"
    assert "malformed response" in error["message"]
    assert "127.0.0.1" not in error["message"]
    assert await gateway.usage_row(rid, wait=2.0) is None


async def test_every_deployment_silent_ends_the_stream_with_a_timeout_error_and_no_row(
    gateway: Gateway,
) -> None:
    """Both deployments never answer: two attempts of 3 s. The edge committed the stream on the
    router's heartbeat after ping_interval (1 s), so the error is an event inside the stream."""
    await sim_a_is_healthy(gateway)
    for sim in (gateway.sim_a, gateway.sim_b):
        await gateway.sim_faults(sim, never_answer=True, count=-1)
    client = gateway.anthropic()
    rid = f"silent-all-{time.time_ns()}"
    started = time.monotonic()
    with pytest.raises(anthropic.APIStatusError) as info:
        await stream_to_the_end(client, **ask("anyone?", rid))
    elapsed = time.monotonic() - started
    error = info.value.body["error"]  # type: ignore[index]
    assert error["type"] == "timeout_error"
    assert f"within {STREAM_FIRST_BYTE:g} seconds" in error["message"]
    assert 2 * STREAM_FIRST_BYTE <= elapsed < 2 * STREAM_FIRST_BYTE + SLACK, elapsed
    assert await gateway.usage_row(rid, wait=2.0) is None
    await gateway.sim_faults(gateway.sim_a)
    await gateway.sim_faults(gateway.sim_b)
    await sim_a_is_healthy(gateway)
