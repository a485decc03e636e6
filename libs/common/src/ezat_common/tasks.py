"""Background tasks kept until they end: ``TaskSet``.

The event loop keeps only a weak reference to a task, so a task started and not kept may be
garbage-collected before it finishes; a service keeps the tasks it spawns in a ``TaskSet``, which
forgets each one when it is done, and at shutdown waits for them or cancels them
(docs/reliability.md, "Graceful shutdown").
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class TaskSet:
    """The running tasks spawned through it."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Coroutine[Any, Any, T], *, name: str | None = None) -> asyncio.Task[T]:
        """Run ``coro`` in a task of its own, kept here until it is done."""
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def __len__(self) -> int:
        return len(self._tasks)

    def cancel(self) -> None:
        """Cancel every task still running."""
        for task in list(self._tasks):
            task.cancel()

    async def wait(self, timeout: float | None = None) -> None:
        """Until every task now running is done, or ``timeout`` seconds have passed."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout)
