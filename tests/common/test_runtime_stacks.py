"""SIGUSR1 prints where a running service waits (docs/reliability.md, "A process that does not
stop"): every thread, and every asyncio task down to what it awaits."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

PROGRAM = """
import asyncio
from ezat_common.runtime import run_service

async def deep_wait(secret):
    await asyncio.sleep(3600)

async def main(stop):
    asyncio.get_running_loop().create_task(deep_wait("not-in-the-dump"), name="waiter")
    print("up", flush=True)
    await stop.wait()

run_service(main)
"""


def test_sigusr1_prints_each_task_down_to_what_it_awaits_and_the_service_keeps_running() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", PROGRAM],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "up"
        proc.send_signal(signal.SIGUSR1)
        time.sleep(0.5)
        assert proc.poll() is None  # a dump does not stop it
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=10)
    finally:
        proc.kill()
    assert proc.returncode == 0
    assert "ezat: stacks on SIGUSR1" in err
    assert "Current thread" in err or "Thread 0x" in err  # the threads' stacks
    waiter = err[err.index("task waiter:") :]
    assert " in deep_wait" in waiter.splitlines()[1]
    assert " in sleep" in waiter  # down the chain: what deep_wait awaits
    assert "not-in-the-dump" not in err  # arguments and locals are never printed
