"""Reloading the config of a running `ezat up` (docs/operations.md, "Changing the config"):
`ezat reload`, or SIGHUP to `ezat up`, validates the file first and either refuses it whole,
with the reason, the running services keeping what they run, or replaces every service, one at a
time, by a rolling restart (``Stack.restart``: the replacement reads the file and takes new work
while the old process finishes what it holds), so models, deployments, prices and limits change
without a request lost and without restarting the stack.

What the stack itself holds is not reloaded: the edge's address (its socket is bound once, by
`ezat up`) and the bundled simulators. A file that changes them is refused, naming them.

The outcome is written to ``<data>/reload.json`` (``{"generation", "ok", "reason"}``) where
`ezat reload` reads it.
"""

from __future__ import annotations

import json
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from ezat_common import preflight
from ezat_common.config import Config, ConfigError, load_config

from . import folder
from .stack import SERVICES, Stack

STATUS_FILE = "reload.json"


@dataclass(frozen=True)
class Outcome:
    generation: int
    ok: bool
    reason: str | None = None


def needs_restart(running: Config, new: Config) -> list[str]:
    """What ``new`` changes that a reload cannot apply: a line each."""
    problems = []
    if new.edge.listen != running.edge.listen:
        problems.append(
            f"edge.listen: {running.edge.listen} -> {new.edge.listen} needs a restart of ezat up"
        )
    if new.simulators != running.simulators:
        problems.append("simulators: the bundled simulators change only with a restart of ezat up")
    return problems


def problems_of(config: Path, running: Config) -> tuple[Config | None, list[str]]:
    """The new config and every reason to refuse it (none: it can be applied)."""
    try:
        new = load_config(str(config))
    except ConfigError as exc:
        return None, [str(exc)]
    return new, preflight.missing_keys(new) + needs_restart(running, new)


def read_status(data_dir: Path) -> Outcome | None:
    try:
        state = json.loads((data_dir / STATUS_FILE).read_text())
        return Outcome(int(state["generation"]), bool(state["ok"]), state.get("reason"))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write_status(data_dir: Path, outcome: Outcome) -> None:
    tmp = data_dir / (STATUS_FILE + ".tmp")
    body = {"generation": outcome.generation, "ok": outcome.ok, "reason": outcome.reason}
    tmp.write_text(json.dumps(body) + "\n")
    tmp.replace(data_dir / STATUS_FILE)


def apply(stack: Stack) -> Outcome:
    """Reload ``stack`` from its config file (`ezat up`'s main thread, on SIGHUP)."""
    before = read_status(stack.data_dir)
    generation = (before.generation if before else 0) + 1
    assert stack.cfg is not None
    new, problems = problems_of(stack.config_path, stack.cfg)
    if new is None or problems:
        reason = "; ".join(problems)
        print(f"ezat: reload refused, the running config stays: {reason}", flush=True)
        outcome = Outcome(generation, ok=False, reason=reason)
    else:
        print(f"ezat: reloading {stack.config_path}: replacing each service in turn", flush=True)
        try:
            for name in SERVICES:
                stack.restart(name)
            stack.cfg = new
            print("ezat: reloaded: every service runs the new config", flush=True)
            outcome = Outcome(generation, ok=True)
        except (RuntimeError, OSError) as exc:  # TimeoutError is an OSError
            print(f"ezat: reload failed: {exc}", flush=True)
            outcome = Outcome(generation, ok=False, reason=f"reload failed: {exc}")
    _write_status(stack.data_dir, outcome)
    return outcome


def request(data_dir: Path, timeout: float) -> Outcome:
    """`ezat reload`: SIGHUP to the `ezat up` of ``data_dir``, then its outcome. ``LookupError``
    when no `ezat up` runs there, ``TimeoutError`` when it did not answer in time."""
    holder = folder.lock_holder(data_dir)
    if holder is None or holder.pid is None or holder.reaper:
        raise LookupError(f"no ezat up is running with data folder {data_dir}")
    before = read_status(data_dir)
    os.kill(holder.pid, signal.SIGHUP)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        now = read_status(data_dir)
        if now is not None and (before is None or now.generation > before.generation):
            return now
        time.sleep(0.1)
    raise TimeoutError(f"ezat up (pid {holder.pid}) did not finish the reload in {timeout:.0f}s")
