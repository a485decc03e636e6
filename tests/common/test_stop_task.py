"""Stopping a background task whose code swallows a cancellation (docs/reliability.md, "A
process that does not stop"): nats-py catches CancelledError in places and Python 3.11's
``wait_for`` can drop one, so a loop that lost its cancellation would run on and a shutdown that
awaited it would never end."""

from __future__ import annotations

import asyncio
import contextlib

from ezat_common.periodic import Periodic
from ezat_common.tasks import stop_task


async def _swallows_once() -> None:
    """A loop whose wait swallows the first cancellation, as a library call can."""
    swallowed = False
    while True:
        try:
            await asyncio.sleep(0.01)
        except asyncio.CancelledError:
            if swallowed:
                raise
            swallowed = True


async def test_a_loop_that_swallowed_its_cancellation_is_stopped_anyway() -> None:
    task = asyncio.create_task(_swallows_once())
    await asyncio.sleep(0.02)
    assert await asyncio.wait_for(stop_task(task), 2.0)
    assert task.done()


async def test_the_plain_cancel_and_await_it_replaces_would_never_end() -> None:
    """The shape it replaces: one cancel, then awaiting the task, still waits after a second."""
    task = asyncio.create_task(_swallows_once())
    await asyncio.sleep(0.02)
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=1.0)
    assert not done
    await stop_task(task)


async def test_a_task_that_never_ends_is_left_behind_after_the_grace() -> None:
    release = asyncio.Event()

    async def stubborn() -> None:
        while not release.is_set():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(0.01)

    task = asyncio.create_task(stubborn())
    await asyncio.sleep(0.02)  # running (a task cancelled before it starts never runs)
    assert not await stop_task(task, grace=0.3)
    assert not task.done()
    release.set()
    await asyncio.wait({task}, timeout=1.0)
    assert task.done()


async def test_a_periodic_whose_step_swallows_a_cancellation_stops() -> None:
    steps = 0

    async def step() -> None:
        nonlocal steps
        steps += 1
        with contextlib.suppress(asyncio.CancelledError):  # as nats-py's publish flush does
            await asyncio.sleep(0.05)

    p = Periodic("swallower", 0.001, step)
    p.start()
    while steps < 2:
        await asyncio.sleep(0.01)
    await asyncio.wait_for(p.stop(), 2.0)


async def test_a_periodic_stopped_and_started_again_runs_its_step_again() -> None:
    steps = 0

    async def step() -> None:
        nonlocal steps
        steps += 1

    p = Periodic("restarted", 0.001, step)
    p.start()
    await p.stop()
    seen = steps
    p.start()
    for _ in range(100):
        if steps > seen:
            break
        await asyncio.sleep(0.01)
    await p.stop()
    assert steps > seen
