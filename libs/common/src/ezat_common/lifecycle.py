"""Graceful shutdown, the same in every service (docs/reliability.md, "Graceful shutdown").

On SIGTERM a service:

1. stops taking new work: ``stop_taking`` drains its queue-group subscriptions (an UNSUB the
   server has confirmed, so new requests go to the other replicas at once; messages already
   delivered here still run), then ``announce_draining`` tells a supervisor so;
2. lets the work in flight finish, up to ``[shutdown] drain_timeout`` seconds (``wait_idle``);
3. ends what is left with an error reply (``RESTARTING``) so that no client is left hanging,
   and exits.

The announcement is a file, ``$EZAT_DRAIN_DIR/<pid>.draining``, written once nothing new can
reach the process. ``ezat up`` sets ``EZAT_DRAIN_DIR`` and starts the replacement as soon as the
file appears, while the old process keeps draining (a rolling restart, as Kubernetes starts a
new pod when the old one begins terminating). The replacement in turn writes ``<pid>.ready``
once it is subscribed (``bus.serve_health``, the last step of every service's start). Without
the variable (a pod) nothing is written.

So that the switch does not cost a whole interpreter start, ``ezat up`` starts the replacement
*before* it signals the old process, with ``EZAT_TAKE_OVER_FROM=<old pid>``: the replacement
imports, reads its config and connects, announces ``<pid>.waiting``, then waits in
``wait_turn`` (called by ``bus.connect``) until the old process has stopped taking work (or is
gone), and only then subscribes; ``ezat up`` sends SIGTERM to the old one once the replacement
is waiting. The window in which nobody takes new work is then milliseconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import environment
from .envelopes import ReplyError

log = logging.getLogger("ezat.lifecycle")

# A replacement waits at most this long for the process it replaces to stop taking work.
TAKE_OVER_WAIT = 60.0
DEFAULT_DRAIN_TIMEOUT = 30.0

# What a client gets for work the drain deadline cut: retryable, and it says why.
RESTARTING = ReplyError(
    status=529,
    type="overloaded_error",
    message="the gateway is restarting and could not finish this response; retry",
    retry_after=1.0,
)


def marker(
    pid: int | None = None,
    folder: str | os.PathLike[str] | None = None,
    state: str = "draining",
) -> Path | None:
    """The file that says process ``pid`` is in ``state`` ("draining": it takes no new work;
    "ready": it does), or None when nobody listens."""
    where = folder if folder is not None else environment.drain_dir()
    if not where:
        return None
    return Path(where) / f"{pid if pid is not None else os.getpid()}.{state}"


def _announce(state: str) -> None:
    path = marker(state=state)
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{time.time():.3f}\n")
    except OSError as exc:  # the service goes on; only the supervisor's early start is lost
        log.warning("could not announce %s: %s", state, exc)


def announce_draining() -> None:
    """Tell the supervisor that this process takes no new work: its replacement may start."""
    _announce("draining")


def announce_ready() -> None:
    """Tell the supervisor that this process is subscribed and takes work."""
    _announce("ready")


async def wait_turn(timeout: float = TAKE_OVER_WAIT) -> None:
    """A replacement started early (``EZAT_TAKE_OVER_FROM``) waits here until the process it
    replaces announced its drain or is gone; anyone else returns at once. Only the first call
    waits (the variable is consumed)."""
    value = environment.take_over_from()
    if not value.isdigit():
        return
    pid = int(value)
    path = marker(pid)
    _announce("waiting")  # warm: the supervisor may now signal the old process
    deadline = time.monotonic() + timeout
    while path is not None and not path.exists() and pid_exists(pid):
        if time.monotonic() > deadline:
            log.warning("process %d did not stop taking work; taking work anyway", pid)
            return
        await asyncio.sleep(0.005)


def pid_exists(pid: int) -> bool:
    """Whether a process ``pid`` exists (a zombie too; one of another user too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


async def stop_taking(*subscriptions: Any) -> None:
    """Drain each subscription (no new messages; delivered ones still run), then announce."""
    for sub in subscriptions:
        if sub is None:
            continue
        with contextlib.suppress(Exception):  # already closed, or NATS is gone: nothing comes
            await sub.drain()
    announce_draining()


async def wait_idle(busy: Callable[[], int], timeout: float, every: float = 0.05) -> int:
    """Wait until ``busy()`` (work in flight) is 0 or ``timeout`` passed; return what is left."""
    deadline = time.monotonic() + timeout
    left = busy()
    while left and time.monotonic() < deadline:
        await asyncio.sleep(min(every, max(deadline - time.monotonic(), 0.0)))
        left = busy()
    return left


def drain_log(service: str, left: int, started: float) -> None:
    """One line per drain: how long it took and what the deadline cut."""
    fields = {"service": service, "seconds": round(time.monotonic() - started, 3), "cut": left}
    if left:
        log.warning("drain deadline reached", extra={"fields": fields})
    else:
        log.info("drained", extra={"fields": fields})
