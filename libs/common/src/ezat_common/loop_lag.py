"""Event-loop lag: how late the loop wakes a task that slept (docs/observability.md).

Anything that holds the loop (a long computation, a long C call holding the GIL) delays every
reply and heartbeat of the process by as much; this is what shows it. One task per process wakes
every ``interval`` and reports how much later than due it woke.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from .periodic import Periodic

LAG_INTERVAL = 0.1  # often enough to catch a stall of 50 ms; ten tiny steps a second


class LoopLag:
    def __init__(self, observe: Callable[[float], None], interval: float = LAG_INTERVAL) -> None:
        self._observe = observe
        self._interval = interval
        self._last: float | None = None
        self._periodic = Periodic("loop-lag", interval, self.step)

    def start(self) -> None:
        self._last = None
        self._periodic.start()

    async def stop(self) -> None:
        await self._periodic.stop()

    async def step(self) -> None:
        """Observe how far past ``interval`` this wake-up came after the last (the first
        only starts the clock)."""
        now = time.monotonic()
        if self._last is not None:
            self._observe(max(0.0, now - self._last - self._interval))
        self._last = now
