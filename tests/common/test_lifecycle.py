"""ezat_common.lifecycle: the drain announcements a supervisor reads, the wait for in-flight
work, and the replacement's wait for its turn (docs/reliability.md, "Graceful shutdown")."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ezat_common import environment, lifecycle


async def test_nothing_is_written_without_a_supervisor(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(environment.DRAIN_DIR, raising=False)
    assert lifecycle.marker() is None
    lifecycle.announce_draining()
    await lifecycle.stop_taking(None)  # no subscription, no folder: nothing to do
    assert list(tmp_path.iterdir()) == []


async def test_stop_taking_drains_then_announces(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(environment.DRAIN_DIR, str(tmp_path))
    seen: list[bool] = []

    class Sub:
        async def drain(self) -> None:
            seen.append((tmp_path / f"{os.getpid()}.draining").exists())

    class Broken:
        async def drain(self) -> None:
            raise RuntimeError("connection closed")

    await lifecycle.stop_taking(Sub(), Broken())
    assert seen == [False]  # announced only once nothing new can arrive
    assert (tmp_path / f"{os.getpid()}.draining").exists()


async def test_wait_idle_returns_when_idle_or_at_the_deadline() -> None:
    work = [3]

    def busy() -> int:
        work[0] = max(work[0] - 1, 0)
        return work[0]

    assert await lifecycle.wait_idle(busy, 5.0, every=0.01) == 0
    start = time.monotonic()
    assert await lifecycle.wait_idle(lambda: 2, 0.2, every=0.01) == 2
    assert 0.15 < time.monotonic() - start < 1.0


async def test_wait_turn_waits_for_the_old_process_to_stop_taking_work(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    old = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        monkeypatch.setenv(environment.DRAIN_DIR, str(tmp_path))
        monkeypatch.setenv(environment.TAKE_OVER_FROM, str(old.pid))
        waiting = asyncio.ensure_future(lifecycle.wait_turn())
        await asyncio.sleep(0.2)
        assert not waiting.done()
        assert (tmp_path / f"{os.getpid()}.waiting").exists()  # warm, told the supervisor
        (tmp_path / f"{old.pid}.draining").write_text("0\n")
        await asyncio.wait_for(waiting, 1.0)
        assert environment.TAKE_OVER_FROM not in os.environ  # only the first connect waits
        await asyncio.wait_for(lifecycle.wait_turn(), 0.1)
    finally:
        old.kill()
        old.wait()


async def test_wait_turn_stops_waiting_when_the_old_process_is_gone(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    old = subprocess.Popen([sys.executable, "-c", "pass"])
    old.wait()
    monkeypatch.setenv(environment.DRAIN_DIR, str(tmp_path))
    monkeypatch.setenv(environment.TAKE_OVER_FROM, str(old.pid))
    await asyncio.wait_for(lifecycle.wait_turn(), 1.0)
