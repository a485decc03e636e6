"""TaskSet: spawned tasks are kept while they run, forgotten once done, waited for or cancelled."""

from __future__ import annotations

import asyncio
import logging

import pytest
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


async def _fail() -> None:
    raise ValueError("broken")


class Told:
    """An ``on_error`` that counts its calls."""

    def __init__(self) -> None:
        self.times = 0

    async def __call__(self) -> None:
        self.times += 1


LOG = logging.getLogger("ezat.test.guarded")


def _logged(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == LOG.name]


async def test_spawn_guarded_logs_a_failure_and_calls_on_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    told, tasks = Told(), TaskSet()
    with caplog.at_level(logging.ERROR, logger=LOG.name):
        task = tasks.spawn_guarded(_fail(), LOG, "handler failed on %s", "subj.x", on_error=told)
        assert await task is None  # the exception stays inside the task
    assert told.times == 1
    [record] = _logged(caplog)
    assert record.getMessage() == "handler failed on subj.x"
    assert record.exc_info is not None and isinstance(record.exc_info[1], ValueError)


async def test_spawn_guarded_is_silent_when_the_work_succeeds(
    caplog: pytest.LogCaptureFixture,
) -> None:
    told, tasks = Told(), TaskSet()
    with caplog.at_level(logging.DEBUG, logger=LOG.name):
        await tasks.spawn_guarded(asyncio.sleep(0), LOG, "never", on_error=told, name="quiet")
    assert told.times == 0 and _logged(caplog) == []
    await asyncio.sleep(0)  # the done callback runs on the next loop turn
    assert len(tasks) == 0


async def test_spawn_guarded_passes_a_cancellation_through() -> None:
    told, tasks = Told(), TaskSet()
    task = tasks.spawn_guarded(asyncio.sleep(3600), LOG, "never", on_error=told)
    await asyncio.sleep(0)
    tasks.cancel()
    await tasks.wait()
    assert task.cancelled() and told.times == 0
