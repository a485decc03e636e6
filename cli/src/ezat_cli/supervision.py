"""One process under supervision: what the supervisor restarts (``Supervised``: a service
``Child`` or an embedded server), the restart rule with its backoff (``supervise``), and what a
rolling restart measured (``Rollover``). ``stack.py`` runs them (docs/reliability.md,
"Supervision").
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

MAX_BACKOFF = 30.0
# Up this long without dying: the next crash is a new incident, its backoff starts over.
HEALTHY_AFTER = 10.0


PR_SET_PDEATHSIG = 1  # linux/prctl.h
_prctl: Any = None
with contextlib.suppress(OSError, AttributeError):  # Linux only; elsewhere the watchdog alone
    _prctl = ctypes.CDLL(None, use_errno=True).prctl


def parent_death_signal() -> Callable[[], None] | None:
    """A ``preexec_fn`` that has the kernel SIGTERM the child when the thread that started it
    exits (``PR_SET_PDEATHSIG``): only for processes started from a thread that lives as long
    as the process (`ezat up`'s main thread), never from a supervisor thread. None where
    ``prctl`` is missing."""
    if _prctl is None:
        return None
    parent = os.getpid()

    def preexec() -> None:
        _prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the prctl: nobody will tell us
            os.kill(os.getpid(), signal.SIGTERM)

    return preexec


class Supervised(Protocol):
    """What the supervisor needs of a process it restarts: a service ``Child`` or an embedded
    server (``infra.Embedded``)."""

    name: str
    restarts: int
    initial_backoff: float
    backoff: float
    next_start: float
    started_at: float
    supervised: bool

    @property
    def alive(self) -> bool: ...

    def start(self) -> None: ...


@dataclass
class Child:
    name: str
    args: list[str]
    env: dict[str, str]
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    initial_backoff: float = 0.5
    backoff: float = 0.5
    next_start: float = 0.0
    started_at: float = 0.0
    supervised: bool = True
    # Replaced processes still draining (``Stack.restart``); stopped with the stack.
    retired: list[subprocess.Popen[bytes]] = field(default_factory=list)
    # Descriptors every process of this child inherits (the edge's listening socket).
    pass_fds: tuple[int, ...] = ()
    # SIGTERMed by the kernel when the starting thread dies (``parent_death_signal``).
    die_with_parent: bool = False

    def start(self, extra_env: dict[str, str] | None = None) -> None:
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child owns it
        env = {**self.env, **extra_env} if extra_env else self.env
        self.proc = subprocess.Popen(
            self.args,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            pass_fds=self.pass_fds,
            preexec_fn=parent_death_signal() if self.die_with_parent else None,
        )
        log.close()
        self.started_at = time.monotonic()

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


@dataclass
class Rollover:
    """Seconds after the SIGTERM of a ``Stack.restart``: when the old process stopped taking
    work, and when its replacement took work (nobody takes new work in between)."""

    stopped_taking: float
    replacement_ready: float | None = None

    @property
    def window(self) -> float | None:
        if self.replacement_ready is None:
            return None
        return max(self.replacement_ready - self.stopped_taking, 0.0)


def supervise(unit: Supervised, now: float, healthy_after: float = HEALTHY_AFTER) -> bool:
    """One supervision step for one process at time ``now``; True when it was (re)started.

    A dead process is started again after its backoff (0.5 s, doubling up to ``MAX_BACKOFF``);
    one that has been up ``healthy_after`` seconds gets its backoff back to the first step.
    """
    if unit.alive:
        if unit.backoff != unit.initial_backoff and now - unit.started_at >= healthy_after:
            unit.backoff = unit.initial_backoff
        return False
    if not unit.supervised:
        return False
    if unit.next_start == 0.0:
        unit.next_start = now + unit.backoff
        unit.backoff = min(unit.backoff * 2, MAX_BACKOFF)
        return False
    if now < unit.next_start:
        return False
    unit.restarts += 1
    unit.next_start = 0.0
    unit.start()
    unit.started_at = now
    return True
