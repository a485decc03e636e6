"""4x saturation load: an edge with ``max_in_flight = 30`` gets 120 requests at once (both APIs,
streaming and not, official SDKs without retries). Beyond the cap it answers 529 (503 on the
OpenAI API) with ``retry-after`` at once instead of queueing into timeouts; the admitted requests
keep the latency they have without the excess; its memory stays bounded; a fresh request is
admitted as soon as the burst is over (docs/reliability.md, "4x saturation load").
"""

from __future__ import annotations

import asyncio
import statistics
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from .load import KINDS, Gateway, History, another_edge, check, one, rss_kib, run_load, summary

pytestmark = pytest.mark.timeout(240)
MAX_IN_FLIGHT = 30
N = 4 * MAX_IN_FLIGHT
TOKENS = 20  # 2 s at the simulator's 100 ms a token
REFUSED_WITHIN = 1.0  # seconds from the call to the refusal, client side included
LATENCY_RATIO = 1.5
RSS_GROWTH_KIB = 64 * 1024  # the burst may add this much to the edge's peak, over the baseline's


@contextmanager
def rss_peak(pid: int) -> Iterator[list[int]]:
    """The edge's largest VmRSS (KiB) while the block runs, sampled every 50 ms: ``[peak]``."""
    peak = [rss_kib(pid)]

    async def sample() -> None:
        while True:
            peak[0] = max(peak[0], rss_kib(pid))
            await asyncio.sleep(0.05)

    task = asyncio.ensure_future(sample())
    try:
        yield peak
    finally:
        task.cancel()
        peak[0] = max(peak[0], rss_kib(pid))


def seconds(histories: list[History]) -> list[float]:
    return sorted(h.seconds for h in histories)


async def test_four_times_max_in_flight_is_refused_at_once_and_the_admitted_keep_their_pace(
    fault_stack: Gateway,
) -> None:
    with another_edge(fault_stack, "edge-sat", max_in_flight=MAX_IN_FLIGHT) as t:
        child = t.stack.children["edge-sat"].proc
        assert child is not None
        for kind in KINDS:  # warm: its database pool, its first connections
            assert (await one(t, kind, 4)).outcome == "complete"
        idle = rss_kib(child.pid)
        with rss_peak(child.pid) as base_peak:
            baseline = await run_load(t, MAX_IN_FLIGHT, TOKENS)  # the cap's worth, all admitted
        check(baseline, bound=15.0)
        assert summary(baseline) == {"complete": MAX_IN_FLIGHT}, summary(baseline)
        with rss_peak(child.pid) as burst_peak:
            burst = await run_load(t, N, TOKENS)
        fresh = await one(t, "anthropic-json", 4)
        fresh_openai = await one(t, "openai-stream", 4)
        in_flight = await t.sample("edge-sat", "ezat_edge_in_flight")
        overloaded = await t.sample("edge-sat", "ezat_edge_overloaded_total")
    admitted = [h for h in burst if h.outcome == "complete"]
    refused = [h for h in burst if h.outcome == "http_error"]
    base, late = seconds(baseline), seconds(admitted)
    print(f"baseline ({MAX_IN_FLIGHT}): {summary(baseline)}, {base[0]:.2f}-{base[-1]:.2f} s")
    print(f"burst ({N}): {summary(burst)}; admitted {late[0]:.2f}-{late[-1]:.2f} s")
    if refused:
        quick = seconds(refused)
        print(
            f"refused in {quick[0]:.3f}-{quick[-1]:.3f} s (median {statistics.median(quick):.3f})"
        )
    print(f"edge RSS: idle {idle} KiB, baseline peak {base_peak[0]}, burst peak {burst_peak[0]}")
    print(f"fresh request {fresh.seconds:.2f} s / {fresh_openai.seconds:.2f} s after the burst")
    check(burst, bound=15.0)  # nothing hung; each complete answer charged once
    assert len(admitted) + len(refused) == N, summary(burst)
    assert len(admitted) >= MAX_IN_FLIGHT and len(refused) >= 2 * MAX_IN_FLIGHT
    assert overloaded == len(refused)
    # Refused at once, in each API's status, with retry-after, and never charged.
    for h in refused:
        assert h.status == (529 if h.kind.startswith("anthropic") else 503), (h.kind, h.error)
        assert h.retry_after == "1", h.error
        assert h.seconds <= REFUSED_WITHIN, (h.kind, h.seconds)
        assert not h.rows, h.rows
    # The admitted keep the latency of the same load without the excess.
    assert statistics.median(late) <= LATENCY_RATIO * statistics.median(base)
    assert late[-1] <= LATENCY_RATIO * base[-1]
    assert burst_peak[0] <= base_peak[0] + RSS_GROWTH_KIB
    # It recovers at once: nothing left in flight, the next requests admitted.
    assert in_flight == 0
    assert fresh.outcome == fresh_openai.outcome == "complete", (fresh.error, fresh_openai.error)
    assert fresh.seconds < 5.0 and fresh_openai.seconds < 5.0
