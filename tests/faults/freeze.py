"""A server that is there but answers nothing (docs/reliability.md, "PostgreSQL down for a
minute under load"): SIGSTOP of a process and of its children, SIGCONT after a while.

PostgreSQL's backends each run in a session of their own, so stopping the postmaster's process
group would leave every open connection working: the postmaster is stopped first (it forks no
new backend from then on), then each backend. The supervisor sees a stopped process as alive.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time

import psutil


async def freeze(pid: int, seconds: float) -> float:
    """Freeze ``pid`` and its descendants for ``seconds``; returns the seconds they were frozen."""
    start = time.monotonic()
    os.kill(pid, signal.SIGSTOP)
    frozen = [pid, *(p.pid for p in psutil.Process(pid).children(recursive=True))]
    try:
        for child in frozen[1:]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGSTOP)
        await asyncio.sleep(seconds)
    finally:
        for each in frozen:
            with contextlib.suppress(ProcessLookupError):
                os.kill(each, signal.SIGCONT)
    return time.monotonic() - start
