"""One background task that runs a step every ``interval`` seconds until stopped: the shape of
the heartbeats (liveness.py), the edge's delivery confirmations, the translator's router watch and
billing's settling. A failing step is logged and the next one runs: none of them may die quietly,
since every held request, every confirmation depends on it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger("ezat.periodic")


class Periodic:
    def __init__(self, name: str, interval: float, step: Callable[[], Awaitable[object]]) -> None:
        self.name = name
        self.interval = interval
        self._step = step
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=self.name)

    async def stop(self) -> None:
        """Cancel the task and wait for it (a step under way is cancelled with it)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self._step()
            except Exception:
                log.exception("%s: a periodic step failed", self.name)
