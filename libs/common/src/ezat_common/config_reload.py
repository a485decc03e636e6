"""Reload without restart, inside a service (docs/operations.md, "Changing the config").

On SIGHUP a service re-reads ``EZAT_CONFIG`` and validates it whole (``parse_config``, and the
service's own ``check``); when it loads and changes only what reloads in place
(``config_changes.needs_restart``), the service's ``apply`` swaps the new objects in for the next
requests (requests in flight keep what they took); otherwise the running config stays and the
reason is logged. Each outcome is counted in ``ezat_<service>_config_reloads_total{outcome}``
and the loaded file's time is ``ezat_<service>_config_loaded_timestamp_seconds``. Under `ezat up`
(``EZAT_DRAIN_DIR`` set) the outcome is also written to ``<pid>.reload`` there, with the
SHA-256 of the file read, for `ezat reload` to report.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import signal
import time
from asyncio import AbstractEventLoop
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from prometheus_client import Counter, Gauge

from . import environment
from .config import Config, ConfigError, config_path, parse_config
from .config_changes import changed_sections, needs_restart

log = logging.getLogger("ezat.reload")

OUTCOMES = ("applied", "refused")
MARKER = "reload"

_METRICS: dict[str, tuple[Counter, Gauge]] = {}


def _metrics(service: str) -> tuple[Counter, Gauge]:
    found = _METRICS.get(service)
    if found is None:
        counter = Counter(
            f"ezat_{service}_config_reloads_total",
            "Config reloads (SIGHUP) by outcome: applied in place, or refused (old config kept)",
            ["outcome"],
        )
        for outcome in OUTCOMES:
            counter.labels(outcome)
        loaded = Gauge(
            f"ezat_{service}_config_loaded_timestamp_seconds",
            "When the config this process runs was loaded (its start or its last applied reload)",
        )
        found = _METRICS[service] = (counter, loaded)
    return found


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Outcome:
    ok: bool
    digest: str
    reason: str | None = None


class Reloader:
    """The running config of one service and how to swap a new one in.

    ``apply(new)`` builds every new object first and then assigns them (nothing awaited in
    between, so no request sees half of it); an exception refuses the reload. ``check(new)``
    adds the service's own reasons to refuse (e.g. the router's missing upstream keys)."""

    def __init__(
        self,
        service: str,
        running: Config,
        apply: Callable[[Config], None],
        check: Callable[[Config], list[str]] | None = None,
        path: str | None = None,
    ) -> None:
        self.service = service
        self.running = running
        self._apply = apply
        self._check = check
        self._path = path
        self._counter, loaded = _metrics(service)
        loaded.set(time.time())

    def install(self, loop: AbstractEventLoop) -> None:
        """Reload on SIGHUP (instead of the default: dying)."""
        loop.add_signal_handler(signal.SIGHUP, self.reload)

    def reload(self) -> Outcome:
        path = config_path(self._path)
        try:
            data = path.read_bytes()
        except OSError as exc:
            return self._refused("", f"{path}: cannot read the configuration: {exc.strerror}")
        sha = digest(data)
        try:
            new = parse_config(data, str(path))
        except ConfigError as exc:
            return self._refused(sha, str(exc))
        problems = needs_restart(self.running, new) + (self._check(new) if self._check else [])
        if problems:
            return self._refused(sha, "; ".join(problems))
        try:
            self._apply(new)
        except Exception as exc:  # the old objects stay: apply assigns only at its end
            log.exception("config reload failed while applying")
            return self._refused(sha, f"applying failed: {exc}")
        changed = changed_sections(self.running, new)
        self.running = new
        self._counter.labels("applied").inc()
        _metrics(self.service)[1].set(time.time())
        log.info("config reloaded", extra={"fields": {"file": str(path), "changed": changed}})
        return self._record(Outcome(True, sha))

    def _refused(self, sha: str, reason: str) -> Outcome:
        self._counter.labels("refused").inc()
        log.warning("config reload refused, the running config stays: %s", reason)
        return self._record(Outcome(False, sha, reason))

    def _record(self, outcome: Outcome) -> Outcome:
        path = marker()
        if path is not None:
            body = {"ok": outcome.ok, "digest": outcome.digest, "reason": outcome.reason}
            try:
                tmp = path.parent / (path.name + ".tmp")
                tmp.write_text(json.dumps(body) + "\n")
                tmp.replace(path)
            except OSError as exc:
                log.warning("could not write the reload outcome: %s", exc)
        return outcome


def marker(pid: int | None = None, folder: str | None = None) -> Path | None:
    """``<drain dir>/<pid>.reload``, or None outside `ezat up`."""
    where = folder if folder is not None else environment.drain_dir()
    if not where:
        return None
    return Path(where) / f"{pid if pid is not None else os.getpid()}.{MARKER}"


def read_marker(path: Path) -> Outcome | None:
    try:
        body = json.loads(path.read_text())
        return Outcome(bool(body["ok"]), str(body["digest"]), body.get("reason"))
    except (OSError, ValueError, KeyError, TypeError):
        return None
