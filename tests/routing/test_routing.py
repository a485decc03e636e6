"""Affinity, health, failover, regions and a Redis outage, end to end: two router replicas,
six simulator deployments (five "eu", one "us"), real NATS/PostgreSQL/Redis. Tests run in file
order and share the stack; each clears its faults and uses fresh session keys."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from typing import Any

import anthropic
import pytest
import redis.asyncio as aioredis

from .conftest import BREAKER_OPEN_SECONDS, EU, Routing, keys_homed_on

MODEL = "claude-sonnet-5-5"
LONG_SYSTEM = " ".join(f"rule {i}: answer tersely and cite sources." for i in range(160))


async def ask(
    gw: Routing,
    session: str | None = None,
    *,
    model: str = MODEL,
    text: str = "hello",
    system: Any = None,
    messages: list[dict[str, Any]] | None = None,
) -> tuple[dict[str, str], anthropic.types.Message]:
    headers = {"x-request-id": f"rt-{uuid.uuid4().hex[:16]}"}
    if session is not None:
        headers["x-ezat-session"] = session
    kw: dict[str, Any] = {}
    if system is not None:
        kw["system"] = system
    raw = await gw.anthropic().messages.with_raw_response.create(
        model=model,
        max_tokens=8,
        messages=messages or [{"role": "user", "content": text}],  # type: ignore[arg-type]
        extra_headers=headers,
        **kw,
    )
    out = {k.lower(): v for k, v in raw.headers.items()}
    out["request-id"] = headers["x-request-id"]
    return out, await raw.parse()


async def homes(gw: Routing, keys: list[str]) -> dict[str, tuple[str, str]]:
    """key -> (deployment, affinity outcome), ten requests at a time."""
    found: dict[str, tuple[str, str]] = {}
    for start in range(0, len(keys), 10):
        batch = keys[start : start + 10]
        answers = await asyncio.gather(*(ask(gw, k) for k in batch))
        for k, (h, _) in zip(batch, answers, strict=True):
            found[k] = (h["x-ezat-deployment"], h["x-ezat-affinity"])
    return found


async def test_a_session_lands_on_one_deployment_from_both_routers(gw: Routing) -> None:
    session = f"sticky-{uuid.uuid4().hex}"
    first, _ = await ask(gw, session)
    assert first["x-ezat-affinity"] == "new"
    assert first["x-ezat-region"] == "eu"
    home = first["x-ezat-deployment"]
    answers = []
    for _ in range(9):
        answers += await asyncio.gather(*(ask(gw, session) for _ in range(11)))
    assert len(answers) == 99
    assert Counter(h["x-ezat-deployment"] for h, _ in answers) == Counter({home: 99})
    assert {h["x-ezat-affinity"] for h, _ in answers} == {"hit"}
    # Both replicas took part (the NATS queue group spreads requests between them).
    ids = [h["request-id"] for h, _ in answers]
    served: list[int] = []
    deadline = time.monotonic() + 5  # "routed" lines are written in batches (logs.FLUSH_AFTER)
    while sum(served) < 99 and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
        logs = [path.read_text(errors="replace") for path in gw.router_logs]
        served = [sum(rid in text for rid in ids) for text in logs]
    assert all(count > 0 for count in served), served
    assert sum(served) == 99


async def test_the_cache_written_on_turn_1_is_read_on_turns_2_to_5(gw: Routing) -> None:
    session = f"cache-{uuid.uuid4().hex}"
    system = [{"type": "text", "text": LONG_SYSTEM, "cache_control": {"type": "ephemeral"}}]
    assert len(LONG_SYSTEM) > 4100
    messages: list[dict[str, Any]] = []
    seen = set()
    for turn in range(1, 6):
        messages.append({"role": "user", "content": f"turn {turn}: what next?"})
        headers, message = await ask(gw, session, system=system, messages=messages)
        seen.add(headers["x-ezat-deployment"])
        usage = message.usage
        if turn == 1:
            assert (usage.cache_creation_input_tokens or 0) > 0
            assert not usage.cache_read_input_tokens
        else:
            assert (usage.cache_read_input_tokens or 0) > 0, f"turn {turn} missed the cache"
        messages.append({"role": "assistant", "content": message.content[0].text})  # type: ignore[union-attr]
    assert len(seen) == 1


async def test_without_a_session_the_stable_prefix_finds_its_cache(gw: Routing) -> None:
    system = [
        {
            "type": "text",
            "text": f"{uuid.uuid4().hex} {LONG_SYSTEM}",
            "cache_control": {"type": "ephemeral"},
        }
    ]
    first, m1 = await ask(gw, system=system, text="question one")
    second, m2 = await ask(gw, system=system, text="another question")
    assert first["x-ezat-affinity"] == second["x-ezat-affinity"] == "prefix"
    assert first["x-ezat-deployment"] == second["x-ezat-deployment"]
    assert (m1.usage.cache_creation_input_tokens or 0) > 0
    assert (m2.usage.cache_read_input_tokens or 0) > 0
    # No session and no cache breakpoint: least-outstanding load balancing.
    plain, _ = await ask(gw, text="no cache here")
    assert plain["x-ezat-affinity"] == "none"


async def test_removing_one_of_five_deployments_moves_only_its_sessions(gw: Routing) -> None:
    keys = [f"move-{uuid.uuid4().hex[:8]}-{i}" for i in range(40)]
    before = await homes(gw, keys)
    per_home = Counter(dep for dep, _ in before.values())
    assert set(per_home) <= set(EU)
    victim = min((d for d in per_home), key=lambda d: per_home[d])
    # The victim answers 429 (retry-after 2 s) to everything: it is out.
    await gw.faults(victim, status=429, retry_after=2, count=-1)
    during = await homes(gw, keys)
    moved = [k for k in keys if during[k][0] != before[k][0]]
    assert moved and all(before[k][0] == victim for k in moved)
    assert len(moved) / len(keys) <= 0.25
    assert all(during[k][1] == "moved" for k in moved)
    assert all(during[k][1] == "hit" for k in keys if k not in moved)
    # Back in service: the moved sessions stay at their new home (their cache is there now).
    await gw.faults(victim)
    await asyncio.sleep(2.3)
    after = await homes(gw, keys)
    assert {k: v[0] for k, v in after.items()} == {k: v[0] for k, v in during.items()}
    assert {v[1] for v in after.values()} == {"hit"}


async def test_429_with_retry_after_keeps_the_deployment_out_for_that_long(gw: Routing) -> None:
    victim = "eu-2"
    keys = keys_homed_on(victim, 8, "cool")
    await gw.faults(victim, status=429, retry_after=2, count=1)
    started = time.monotonic()
    headers, _ = await ask(gw, keys[0])
    assert headers["x-ezat-deployment"] != victim  # failed over before the first byte
    calls = await gw.calls(victim)
    await asyncio.sleep(0.5)  # both replicas hear of it (health sync 0.25 s)
    for key in keys[1:6]:
        headers, _ = await ask(gw, key)
        assert headers["x-ezat-deployment"] != victim
    assert time.monotonic() - started < 2.0, "the machine was too slow to observe the window"
    assert await gw.calls(victim) == calls
    await asyncio.sleep(max(0.0, 2.3 - (time.monotonic() - started)))
    headers, _ = await ask(gw, keys[6])
    assert headers["x-ezat-deployment"] == victim


async def test_five_529s_open_the_breaker_and_the_probe_closes_it(gw: Routing) -> None:
    victim = "eu-4"
    keys = keys_homed_on(victim, 16, "breaker")
    await gw.faults(victim, status=529, count=-1)
    before = await gw.calls(victim)
    for key in keys[:10]:
        headers, _ = await ask(gw, key)  # the client sees success: failover before the first byte
        assert headers["x-ezat-deployment"] != victim
        await asyncio.sleep(0.05)
    tried = await gw.calls(victim) - before
    # Five consecutive faults open it; a replica may send one or two more before it syncs.
    assert 5 <= tried <= 8, tried
    opened_at = time.monotonic()
    await asyncio.sleep(0.3)
    for key in keys[10:13]:
        await ask(gw, key)
    assert await gw.calls(victim) - before == tried  # open: nothing reaches it
    await gw.faults(victim)
    await asyncio.sleep(max(0.0, BREAKER_OPEN_SECONDS + 0.3 - (time.monotonic() - opened_at)))
    # Half-open: the next request homed there is the probe; its success closes the breaker.
    probe, _ = await ask(gw, keys[13])
    assert probe["x-ezat-deployment"] == victim
    await asyncio.sleep(0.4)
    for key in keys[14:16]:
        headers, _ = await ask(gw, key)
        assert headers["x-ezat-deployment"] == victim


async def test_529_before_the_first_byte_fails_over_in_a_stream(gw: Routing) -> None:
    victim = "eu-5"
    [key] = keys_homed_on(victim, 1, "stream-failover")
    await gw.faults(victim, status=529, count=1)
    before = await gw.calls(victim)
    async with gw.anthropic().messages.stream(
        model=MODEL,
        max_tokens=8,
        messages=[{"role": "user", "content": "stream please [sim:tokens=4]"}],
        extra_headers={"x-ezat-session": key},
    ) as stream:
        final = await stream.get_final_message()
    assert final.stop_reason in ("end_turn", "max_tokens")
    assert await gw.calls(victim) == before + 1  # tried first, then the next deployment answered


async def test_a_failure_after_the_first_byte_is_an_error_event(gw: Routing) -> None:
    texts: list[str] = []
    with pytest.raises(anthropic.APIStatusError) as info:
        async with gw.anthropic().messages.stream(
            model=MODEL,
            max_tokens=64,
            messages=[{"role": "user", "content": "break [sim:tokens=20] [sim:fail_after=3]"}],
            extra_headers={"x-ezat-session": f"midstream-{uuid.uuid4().hex}"},
        ) as stream:
            async for event in stream:
                if event.type == "content_block_delta":
                    texts.append(event.delta.text)  # type: ignore[union-attr]
    assert len(texts) == 3  # bytes reached the client, then the error event; no silent switch
    assert info.value.body["error"]["type"] == "overloaded_error"  # type: ignore[index]


async def test_cross_region_fallback_when_the_local_region_is_down(gw: Routing) -> None:
    for name in ("eu-1", "eu-2"):  # the simulators of reg-eu-1 and reg-eu-2
        await gw.faults(name, status=429, retry_after=3, count=-1)
    first, _ = await ask(gw, f"region-{uuid.uuid4().hex}", model="regional-sim")
    # Both local deployments refused before the first byte; the third attempt crossed regions.
    assert (first["x-ezat-deployment"], first["x-ezat-region"]) == ("reg-us-1", "us")
    await asyncio.sleep(0.4)
    for _ in range(4):
        headers, _ = await ask(gw, f"region-{uuid.uuid4().hex}", model="regional-sim")
        assert (headers["x-ezat-deployment"], headers["x-ezat-region"]) == ("reg-us-1", "us")


async def test_every_deployment_down_is_529_with_retry_after(gw: Routing) -> None:
    for name in ("eu-1", "eu-2", "us-1"):  # every deployment of the regional model
        await gw.faults(name, status=529, count=-1)
    client = gw.anthropic()
    for i in range(8):
        with pytest.raises(anthropic.APIStatusError) as info:
            await client.messages.create(
                model="regional-sim",
                max_tokens=8,
                messages=[{"role": "user", "content": f"anyone? {i}"}],
            )
        err = info.value
        assert err.status_code == 529
        assert int(err.response.headers["retry-after"]) >= 1
        assert err.response.headers["x-ezat-affinity"] == "none"


async def test_redis_stopped_mid_test_routing_keeps_working(gw: Routing) -> None:
    keys = [f"outage-{uuid.uuid4().hex[:8]}-{i}" for i in range(6)]
    before = await homes(gw, keys)
    gw.stop_redis()
    try:
        for _ in range(3):
            during = await homes(gw, keys)  # any 5xx would raise here
            # Sessions that never moved are found again by hashing alone.
            assert {k: v[0] for k, v in during.items()} == {k: v[0] for k, v in before.items()}
        fresh, _ = await ask(gw, f"outage-new-{uuid.uuid4().hex}")
        assert fresh["x-ezat-deployment"] in EU
    finally:
        gw.start_redis()
    await asyncio.sleep(1.0)  # the sync loop reaches the new Redis
    session = f"after-outage-{uuid.uuid4().hex}"
    first, _ = await ask(gw, session)
    await asyncio.sleep(0.2)  # the binding is written after the answer
    r = aioredis.from_url(gw.redis_url)
    try:
        assert await r.keys("routing:aff:*"), "bindings are stored again once Redis is back"
    finally:
        await r.aclose()
    again, _ = await ask(gw, session)
    assert again["x-ezat-affinity"] == "hit"
    assert again["x-ezat-deployment"] == first["x-ezat-deployment"]
