"""Background tasks kept until they end: ``TaskSet`` (``spawn_guarded`` for a task per message
whose failure is logged, not lost); and stopping one that may have swallowed its cancellation:
``stop_task``.

The event loop keeps only a weak reference to a task, so a task started and not kept may be
garbage-collected before it finishes; a service keeps the tasks it spawns in a ``TaskSet``, which
forgets each one when it is done, and at shutdown waits for them or cancels them
(docs/reliability.md, "Graceful shutdown").
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

log = logging.getLogger("ezat.tasks")

# A cancellation can be swallowed on its way down: nats-py catches CancelledError in places (a
# publish's flush, a pull fetch) and Python 3.11's ``wait_for`` drops one that races its inner
# future. A loop task that lost its cancellation runs on, and a stop awaiting it waits forever
# (docs/reliability.md, "A process that does not stop"): the cancellation is repeated until it
# lands.
CANCEL_AGAIN_EVERY = 0.05
STOP_GRACE = 5.0


async def stop_task(task: asyncio.Task[Any] | None, grace: float = STOP_GRACE) -> bool:
    """Cancel ``task`` and wait until it has ended, cancelling it again every
    ``CANCEL_AGAIN_EVERY`` s in case a cancellation was swallowed. False (logged) if it still runs
    after ``grace`` s: it is left behind rather than holding the caller's shutdown."""
    if task is None or task.done():
        return True
    loop = asyncio.get_running_loop()
    until = loop.time() + grace
    while not task.done():
        left = until - loop.time()
        if left <= 0:
            log.warning("task %s did not stop within %.1f s; left behind", task.get_name(), grace)
            return False
        task.cancel()
        await asyncio.wait({task}, timeout=min(CANCEL_AGAIN_EVERY, left))
    if not task.cancelled() and task.exception() is not None:
        log.warning("task %s ended with %r", task.get_name(), task.exception())
    return True


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

    def spawn_guarded(
        self,
        work: Awaitable[None],
        log: logging.Logger,
        failure: str,
        *args: object,
        on_error: Callable[[], Awaitable[None]] | None = None,
        name: str | None = None,
    ) -> asyncio.Task[None]:
        """``spawn`` for work started per message: an exception ``work`` raises is logged on
        ``log`` with its traceback (``log.exception(failure, *args)``: ``args`` are formatted
        only then), then ``on_error`` is awaited, e.g. to tell the requester. Nothing is raised:
        the task's exception would otherwise surface only when the task is collected, if ever."""
        return self.spawn(_guarded(work, log, failure, args, on_error), name=name)

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


async def _guarded(
    work: Awaitable[None],
    log: logging.Logger,
    failure: str,
    args: tuple[object, ...],
    on_error: Callable[[], Awaitable[None]] | None,
) -> None:
    try:
        await work
    except Exception:
        log.exception(failure, *args)
        if on_error is not None:
            await on_error()
