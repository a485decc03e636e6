"""One background task that runs a step every ``interval`` seconds until stopped: the shape of
the heartbeats (liveness.py), the edge's delivery confirmations, the translator's router watch and
billing's settling. A failing step is logged and the next one runs: none of them may die quietly,
since every held request, every confirmation depends on it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from .tasks import stop_task

log = logging.getLogger("ezat.periodic")


class Periodic:
    def __init__(self, name: str, interval: float, step: Callable[[], Awaitable[object]]) -> None:
        self.name = name
        self.interval = interval
        self._step = step
        self._task: asyncio.Task[None] | None = None
        self._stopped = False

    def start(self) -> None:
        self._stopped = False  # a Periodic stopped and started again runs again
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=self.name)

    async def stop(self) -> None:
        """Cancel the task and wait for it (a step under way is cancelled with it). The loop also
        checks a flag: a step that swallowed its cancellation ends the loop all the same."""
        self._stopped = True
        task, self._task = self._task, None
        await stop_task(task)

    async def _run(self) -> None:
        while not self._stopped:
            await asyncio.sleep(self.interval)
            try:
                await self._step()
            except Exception:
                log.exception("%s: a periodic step failed", self.name)
