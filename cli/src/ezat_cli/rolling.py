"""A rolling restart's replacement process (``Stack.restart``): whether a service announces its
turn, starting the replacement warm beside the old process, and waiting until it announces a
state (``<pid>.<state>`` in the drain folder, ``ezat_common.lifecycle``) or the stack is ready.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from ezat_common import environment, lifecycle

from . import infra as infra_mod
from .supervision import Child

# Services that announce readiness and drains and wait their turn (``ezat_common.lifecycle``);
# the edge announces too, but needs no turn: it shares its socket with its replacement.
ANNOUNCING = ("ezat_router", "ezat_translator", "ezat_billing", "ezat_fetcher")


def announces(child: Child) -> bool:
    return any(f"-m {m}" in " ".join(child.args) for m in ANNOUNCING)


def start_warm(
    child: Child, old: subprocess.Popen[bytes], state: str, timeout: float, drain_dir: Path
) -> None:
    """Start the replacement while ``old`` still serves, until it announces ``state``."""
    extra = {environment.TAKE_OVER_FROM: str(old.pid)} if state == "waiting" else None
    child.start(extra)
    try:
        wait_state(child, state, timeout, drain_dir)
    except BaseException:  # the old process stays in charge, untouched
        if child.proc is not None:
            infra_mod.stop_process(child.proc, timeout=5)
        child.proc = old
        raise


def wait_replacement(
    child: Child, timeout: float, drain_dir: Path, ready: Callable[[], bool]
) -> None:
    """Until the replacement takes work: its ``<pid>.ready`` announcement, or (the edge and
    simulators announce nothing) ``ready``: the stack's ``/api/status``."""
    if announces(child):
        wait_state(child, "ready", timeout, drain_dir)
        return
    deadline = time.monotonic() + timeout
    while not ready():
        _still_starting(child, "ready", deadline, timeout)
        time.sleep(0.005)


def wait_state(child: Child, state: str, timeout: float, drain_dir: Path) -> None:
    """Until the child's process announces ``state`` (``<pid>.<state>``), then forget it."""
    assert child.proc is not None
    mark = lifecycle.marker(child.proc.pid, drain_dir, state=state)
    assert mark is not None
    deadline = time.monotonic() + timeout
    while not mark.exists():
        _still_starting(child, state, deadline, timeout)
        time.sleep(0.005)
    with contextlib.suppress(FileNotFoundError):
        mark.unlink()


def _still_starting(child: Child, state: str, deadline: float, timeout: float) -> None:
    """Raises when the new process exited, or is not ``state`` by ``deadline``."""
    if not child.alive:
        tail = child.log_path.read_text(errors="replace")[-2000:]
        raise RuntimeError(f"the new {child.name} exited while starting:\n{tail}")
    if time.monotonic() > deadline:
        raise TimeoutError(f"the new {child.name} was not {state} after {timeout}s")
