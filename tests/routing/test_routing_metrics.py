"""The router's series as Prometheus scrapes them (docs/observability.md, "Router"): both router
replicas' /metrics, after traffic through the edge to the simulator deployments. Runs after
test_routing.py on the same stack; each test leaves every deployment healthy again."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from .conftest import BREAKER_OPEN_SECONDS, Routing, keys_homed_on
from .test_routing import LONG_SYSTEM, ask


async def scrape(gw: Routing, name: str, **labels: str) -> list[float]:
    """The sample ``name`` with ``labels`` (among its own) on each replica (0 when absent)."""
    found: list[float] = []
    async with aiohttp.ClientSession() as http:
        for url in gw.metrics_urls:
            async with http.get(url) as r:
                text = await r.text()
            value = 0.0
            for family in text_string_to_metric_families(text):
                for s in family.samples:
                    if s.name == name and labels.items() <= s.labels.items():
                        value += s.value
            found.append(value)
    return found


async def total(gw: Routing, name: str, **labels: str) -> float:
    """Summed over the replicas: a request is served by whichever the queue group picks."""
    return sum(await scrape(gw, name, **labels))


async def attempts(gw: Routing, deployment: str, outcome: str) -> float:
    labels = {"deployment": deployment, "kind": "anthropic", "outcome": outcome}
    return await total(gw, "ezat_router_attempts_total", **labels)


async def oks(gw: Routing) -> float:
    return await total(gw, "ezat_router_attempts_total", outcome="ok")


async def counted(gw: Routing, ok: float) -> None:
    """Until the replicas counted ``ok`` successful attempts in all (the router counts right after
    its final reply, so the client may be a moment ahead of the scrape)."""
    deadline = time.monotonic() + 3.0
    while await oks(gw) < ok:
        assert time.monotonic() < deadline, "the attempt was never counted"
        await asyncio.sleep(0.05)


async def test_prompt_tokens_move_by_the_usage_the_deployment_reported(gw: Routing) -> None:
    session = f"tokens-{uuid.uuid4().hex}"
    # A prompt of its own: earlier tests cached LONG_SYSTEM on some deployments.
    text = f"{uuid.uuid4().hex} {LONG_SYSTEM}"
    system = [{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}]
    messages: list[dict[str, Any]] = [{"role": "user", "content": "turn 1"}]
    ok = await oks(gw)
    headers, message = await ask(gw, session, system=system, messages=messages)
    home = headers["x-ezat-deployment"]
    assert (message.usage.cache_creation_input_tokens or 0) > 0  # turn 1 wrote the cache
    await counted(gw, ok + 1)
    messages += [
        {"role": "assistant", "content": message.content[0].text},  # type: ignore[union-attr]
        {"role": "user", "content": "turn 2"},
    ]
    kinds = ("uncached", "cache_read", "cache_write")
    tokens = "ezat_router_prompt_tokens_total"
    before = {k: await total(gw, tokens, deployment=home, kind=k) for k in kinds}
    ok = await oks(gw)
    home_ok = await attempts(gw, home, "ok")

    headers, message = await ask(gw, session, system=system, messages=messages)

    assert headers["x-ezat-deployment"] == home
    await counted(gw, ok + 1)
    assert await attempts(gw, home, "ok") == home_ok + 1
    moved = {k: await total(gw, tokens, deployment=home, kind=k) - before[k] for k in kinds}
    usage = message.usage
    assert (usage.cache_read_input_tokens or 0) > 0
    assert moved == {
        "uncached": usage.input_tokens,
        "cache_read": usage.cache_read_input_tokens,
        "cache_write": usage.cache_creation_input_tokens or 0,
    }


async def test_a_failover_and_the_cooldown_show_on_both_replicas(gw: Routing) -> None:
    victim = "eu-3"
    keys = keys_homed_on(victim, 2, "metrics-cool")
    up = {"deployment": victim}
    assert await scrape(gw, "ezat_router_deployment_up", **up) == [1.0, 1.0]
    limited = await attempts(gw, victim, "rate_limited")
    ok, victim_ok = await oks(gw), await attempts(gw, victim, "ok")
    await gw.faults(victim, status=429, retry_after=2, count=1)
    started = time.monotonic()
    headers, _ = await ask(gw, keys[0])
    served = headers["x-ezat-deployment"]
    assert served != victim
    await counted(gw, ok + 1)
    # One attempt failed on the victim, the one after it served: that is all.
    assert await attempts(gw, victim, "rate_limited") == limited + 1
    assert (await oks(gw), await attempts(gw, victim, "ok")) == (ok + 1, victim_ok)
    # Health is shared through Redis: the replica that did not see the 429 shows it after a sync.
    await asyncio.sleep(0.5)
    assert await scrape(gw, "ezat_router_deployment_up", **up) == [0.0, 0.0]
    remaining = await scrape(gw, "ezat_router_cooldown_remaining_seconds", **up)
    assert all(0.0 < r <= 2.0 for r in remaining), remaining
    assert await scrape(gw, "ezat_router_breaker_open", **up) == [0.0, 0.0]
    assert time.monotonic() - started < 2.0, "the machine was too slow to observe the window"
    await asyncio.sleep(max(0.0, 2.2 - (time.monotonic() - started)))
    assert await scrape(gw, "ezat_router_deployment_up", **up) == [1.0, 1.0]
    assert await scrape(gw, "ezat_router_cooldown_remaining_seconds", **up) == [0.0, 0.0]


async def test_breaker_open_is_1_on_both_replicas_until_the_probe_closes_it(gw: Routing) -> None:
    victim = "eu-1"
    keys = keys_homed_on(victim, 12, "metrics-breaker")
    up = {"deployment": victim}
    overloaded = await attempts(gw, victim, "overloaded")
    await gw.faults(victim, status=529, count=-1)
    for key in keys[:8]:
        await ask(gw, key)
        await asyncio.sleep(0.05)
    opened_at = time.monotonic()
    await asyncio.sleep(0.5)  # both replicas synced from Redis
    tried = await attempts(gw, victim, "overloaded") - overloaded
    assert 5 <= tried <= 8, tried  # five consecutive faults open it (test_routing.py)
    assert await scrape(gw, "ezat_router_breaker_open", **up) == [1.0, 1.0]
    assert await scrape(gw, "ezat_router_deployment_up", **up) == [0.0, 0.0]
    await gw.faults(victim)
    await asyncio.sleep(max(0.0, BREAKER_OPEN_SECONDS + 0.3 - (time.monotonic() - opened_at)))
    assert await scrape(gw, "ezat_router_breaker_open", **up) == [1.0, 1.0]  # half-open
    probe, _ = await ask(gw, keys[8])
    assert probe["x-ezat-deployment"] == victim
    await asyncio.sleep(0.5)
    assert await scrape(gw, "ezat_router_breaker_open", **up) == [0.0, 0.0]
    assert await scrape(gw, "ezat_router_deployment_up", **up) == [1.0, 1.0]
