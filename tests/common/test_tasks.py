"""TaskSet: spawned tasks are kept while they run, forgotten once done, waited for or cancelled."""

from __future__ import annotations

import asyncio

from ezat_common.tasks import TaskSet


async def test_a_task_is_kept_until_it_is_done() -> None:
    tasks = TaskSet()
    gate = asyncio.Event()
    task = tasks.spawn(gate.wait(), name="waiter")
    assert len(tasks) == 1 and task.get_name() == "waiter"
    gate.set()
    assert await task is True
    await asyncio.sleep(0)  # the done callback runs on the next loop turn
    assert len(tasks) == 0 and not tasks


async def test_wait_returns_after_the_timeout_with_tasks_still_running() -> None:
    tasks = TaskSet()
    task = tasks.spawn(asyncio.sleep(3600))
    await tasks.wait(timeout=0.01)
    assert not task.done() and len(tasks) == 1
    tasks.cancel()
    await tasks.wait()
    assert task.cancelled()


async def test_wait_on_nothing_returns_at_once() -> None:
    await asyncio.wait_for(TaskSet().wait(), 1.0)
