"""The bench's memory phases (``run.py``): slow streams held open at once, and the soak."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

import aiohttp
import loadgen
from procstat import Sampler, rss_mb
from stackrun import MODES, SERVICES, STACK_GROUPS

if TYPE_CHECKING:
    from run import Bench


async def open_streams(bench: Bench) -> None:
    """``--open-streams`` slow streams held open at once: the whole stack's RSS."""
    n = bench.args.open_streams
    if n <= 0:
        return
    ms = 50
    tokens = 60 if bench.args.quick else 200
    target = bench.target("anthropic", "stream", extra=f" token_ms={ms}", tokens=tokens)
    sampler = Sampler(bench.group, STACK_GROUPS, interval=0.25)
    sampler.start()
    active = [0]
    poll = asyncio.create_task(_poll_active(bench, active))
    started = time.monotonic()
    result = await loadgen.run_phase(target, n, 600, warmup=0, requests=n, timeout=300)
    poll.cancel()
    await sampler.stop()
    result.update(
        streams=n,
        stream_seconds=tokens * ms / 1000,
        wall_s=round(time.monotonic() - started, 1),
        max_active_upstream=active[0],
        rss_peak_mb=sampler.peak,
        stack_rss_peak_mb=sampler.peak_total,
    )
    bench.results["open_streams"] = result
    print(f"  open streams: {n} -> upstream max active {active[0]}, stack peak "
          f"{sampler.peak_total} MB, errors {result['errors']}", flush=True)  # fmt: skip


async def _poll_active(bench: Bench, active: list[int]) -> None:
    async with aiohttp.ClientSession() as s:
        while True:
            try:
                async with s.get(bench.sys.stack_sim_url + "/_sim/stats") as r:
                    active[0] = max(active[0], (await r.json())["active"])
            except (aiohttp.ClientError, OSError, KeyError, ValueError):
                pass
            await asyncio.sleep(0.25)


async def soak(bench: Bench, seconds: float) -> None:
    """Mixed load for ``seconds``: RSS growth per service."""
    conc = 16
    samples: list[tuple[float, dict[str, float]]] = []
    start = time.monotonic()

    async def sample() -> None:
        while True:
            snap = await asyncio.to_thread(lambda: rss_mb(bench.group.snapshot()))
            samples.append((time.monotonic() - start, snap))
            await asyncio.sleep(5)

    sampler = asyncio.create_task(sample())
    phases = await asyncio.gather(
        *(
            loadgen.run_phase(bench.target("anthropic", mode), conc, seconds, warmup=0)
            for mode in MODES
        )
    )
    sampler.cancel()
    # Growth is measured from the end of the first tenth (allocators and caches warmed).
    base = next((s for t, s in samples if t >= seconds / 10), samples[0][1])
    end = samples[-1][1]
    growth = {n: round((end[n] - base[n]) / base[n] * 100, 2) for n in SERVICES if base[n]}
    total_base = sum(base[n] for n in SERVICES)
    total_end = sum(end[n] for n in SERVICES)
    bench.results["soak"] = {
        "seconds": seconds,
        "requests": sum(p["ok"] for p in phases),
        "errors": sum(p["errors"] for p in phases),
        "rss_base_mb": {n: base[n] for n in SERVICES},
        "rss_end_mb": {n: end[n] for n in SERVICES},
        "growth_pct": growth,
        "services_growth_pct": round((total_end - total_base) / total_base * 100, 2),
        "samples": [(round(t, 1), sum(s[n] for n in SERVICES)) for t, s in samples],
    }
