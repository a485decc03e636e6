"""Reloading the config of a running `ezat up` (docs/operations.md, "Changing the config"):
`ezat reload`, or SIGHUP to `ezat up`, validates the file first and either refuses it whole,
with the reason, the running services keeping what they run, or applies it:

- in place, when it changes only what the services reload themselves
  (``ezat_common.config_changes``: models, deployments, prices, the router's per-request limits):
  each service process gets a SIGHUP, reloads (``ezat_common.config_reload``) and writes its
  outcome to ``<data>/drain/<pid>.reload``, which is read here. No process is replaced.
- by a rolling restart (``Stack.restart``), when it changes another setting a service reads
  only at its start (e.g. ``[edge] max_in_flight``): the replacement reads the file and takes
  new work while the old process finishes what it holds.

What the stack itself holds is not reloaded: the edge's address (its socket is bound once, by
`ezat up`) and the bundled simulators. A file that changes them is refused, naming them.

The outcome is written to ``<data>/reload.json`` (``{"generation", "ok", "reason", "how"}``)
where `ezat reload` reads it.
"""

from __future__ import annotations

import json
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from ezat_common import config_changes, config_reload, preflight
from ezat_common.config import Config, ConfigError, load_config

from . import folder
from .stack import MODULES, SERVICES, Stack

STATUS_FILE = "reload.json"


@dataclass(frozen=True)
class Outcome:
    generation: int
    ok: bool
    reason: str | None = None
    how: str = ""  # "in place" or "rolling restart"; "" when refused


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
        ok, reason, how = bool(state["ok"]), state.get("reason"), state.get("how", "")
        return Outcome(int(state["generation"]), ok, reason, how)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write_status(data_dir: Path, outcome: Outcome) -> None:
    tmp = data_dir / (STATUS_FILE + ".tmp")
    body = {
        "generation": outcome.generation,
        "ok": outcome.ok,
        "reason": outcome.reason,
        "how": outcome.how,
    }
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
    elif config_changes.needs_restart(stack.cfg, new):
        outcome = _rolling(stack, new, generation)
    else:
        outcome = _in_place(stack, new, generation)
    _write_status(stack.data_dir, outcome)
    return outcome


def _rolling(stack: Stack, new: Config, generation: int) -> Outcome:
    print(f"ezat: reloading {stack.config_path}: replacing each service in turn", flush=True)
    try:
        for name in SERVICES:
            stack.restart(name)
        stack.cfg = new
        print("ezat: reloaded: every service runs the new config", flush=True)
        return Outcome(generation, ok=True, how="rolling restart")
    except (RuntimeError, OSError) as exc:  # TimeoutError is an OSError
        print(f"ezat: reload failed: {exc}", flush=True)
        return Outcome(generation, ok=False, reason=f"reload failed: {exc}")


def _in_place(stack: Stack, new: Config, generation: int) -> Outcome:
    print(f"ezat: reloading {stack.config_path} in place (SIGHUP to each service)", flush=True)
    sha = config_reload.digest(stack.config_path.read_bytes())
    answers = signal_services(stack, sha)
    refused = [f"{name}: {why}" for name, why in answers.items() if why is not None]
    stack.cfg = new  # a service that refused (the file changed meanwhile?) says so below
    if refused:
        reason = "; ".join(refused)
        print(f"ezat: reload incomplete: {reason}", flush=True)
        return Outcome(generation, ok=False, reason=reason, how="in place")
    print(f"ezat: reloaded in place: {', '.join(answers)} run the new config", flush=True)
    return Outcome(generation, ok=True, how="in place")


def _services(stack: Stack) -> dict[str, int]:
    """The pid of every running service process (replicas included), by child name."""
    modules = [f"-m {MODULES[s]}" for s in SERVICES]
    out = {}
    for name, child in stack.children.items():
        proc = child.proc
        command = " ".join(child.args)
        if proc is not None and proc.poll() is None and any(m in command for m in modules):
            out[name] = proc.pid
    return out


def signal_services(stack: Stack, sha: str, timeout: float = 10.0) -> dict[str, str | None]:
    """SIGHUP to every service process, then each one's answer for the file of digest ``sha``:
    None when it applied it, else its reason."""
    markers = {}
    for name, pid in _services(stack).items():
        path = config_reload.marker(pid, str(stack.drain_dir))
        assert path is not None
        path.unlink(missing_ok=True)
        os.kill(pid, signal.SIGHUP)
        markers[name] = path
    answers: dict[str, str | None] = {}
    deadline = time.monotonic() + timeout
    while len(answers) < len(markers) and time.monotonic() < deadline:
        for name, path in markers.items():
            got = config_reload.read_marker(path)
            if name not in answers and got is not None:
                same = got.digest == sha
                answers[name] = got.reason if same else "it read another version of the file"
        time.sleep(0.05)
    for name in markers:
        answers.setdefault(name, f"no answer in {timeout:.0f}s")
    return answers


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
