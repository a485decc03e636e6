"""The simulator's admin API (``/_sim/...``, simulator/src/ezat_simulator) as stack tests use
it."""

from __future__ import annotations

from typing import Any

import aiohttp


async def set_faults(sim: str, **fault: Any) -> None:
    """Arm ``fault`` on the simulator at base URL ``sim``; no fault clears them."""
    async with aiohttp.ClientSession() as s:
        if fault:
            async with s.post(f"{sim}/_sim/faults", json=fault) as r:
                assert r.status < 300
        else:
            async with s.delete(f"{sim}/_sim/faults") as r:
                assert r.status < 300


async def requests(sim: str, limit: int) -> list[dict[str, Any]]:
    """The simulator's request log, newest ``limit`` entries."""
    async with aiohttp.ClientSession() as s, s.get(f"{sim}/_sim/requests?limit={limit}") as r:
        data: list[dict[str, Any]] = await r.json()
        return data


async def request_count(sim: str) -> int:
    """Requests the simulator has received so far."""
    async with aiohttp.ClientSession() as s, s.get(f"{sim}/_sim/stats") as r:
        return int((await r.json())["requests"])
