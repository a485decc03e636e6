"""One service process on its own NATS server, and its readiness as Kubernetes reads it: the
tests that take one of its own dependencies away (docs/reliability.md, "Readiness").

``alone(module, folder, env)`` starts ``python -m <module>`` with a config whose ``[<service>]
metrics_listen`` (or ``[edge] listen``) is a free port, on a NATS server of its own that the test
may stop (``Alone.stop_nats``); ``get(url)`` reads a probe's status and JSON body;
``ready_until_nats_goes`` is the check of a service that needs nothing but NATS.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ezat_cli.infra import free_port, start_nats, stop_process
from prometheus_client.parser import text_string_to_metric_families

from .config import base_url, listen, write_config


@dataclass
class Alone:
    url: str  # where /readyz, /healthz and /metrics are served
    nats: subprocess.Popen[bytes]
    proc: subprocess.Popen[bytes]
    log: Path

    def stop_nats(self) -> None:
        stop_process(self.nats)

    def get(self, path: str) -> tuple[int, Any]:
        return get(self.url + path)

    def ready_gauge(self) -> float:
        with urllib.request.urlopen(self.url + "/metrics", timeout=5) as resp:
            text = resp.read().decode()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "ezat_ready":
                    return float(sample.value)
        raise AssertionError("ezat_ready is not exported")

    def until(self, path: str, status: int, timeout: float = 30.0) -> Any:
        """The body of ``path`` once it answers ``status``."""
        deadline = time.monotonic() + timeout
        seen: tuple[int, Any] = (0, None)
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"exited: {self.log.read_text(errors='replace')[-2000:]}")
            try:
                seen = self.get(path)
            except OSError:
                seen = (0, None)
            if seen[0] == status:
                return seen[1]
            time.sleep(0.2)
        raise AssertionError(f"{path} answered {seen} instead of {status} for {timeout}s")


def ready_until_nats_goes(service: Alone) -> None:
    """A service that needs only NATS: ready on it, unready once its server stops, and alive
    (``/healthz``) all along; ``ezat_ready`` says the same."""
    assert service.until("/readyz", 200)["checks"] == {"nats": "ok", "subscriptions": "ok"}
    assert service.ready_gauge() == 1.0
    service.stop_nats()
    assert service.until("/readyz", 503)["checks"]["nats"] == "not connected"
    assert service.get("/healthz") == (200, {"status": "ok"})
    assert service.ready_gauge() == 0.0


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    """The status and JSON body of a GET (an error status is an answer, not an exception)."""
    try:
        request = urllib.request.Request(url, headers=headers or {})
        with urllib.request.urlopen(request, timeout=10) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"null")


@contextmanager
def alone(
    module: str, service: str, folder: Path, env: dict[str, str], **sections: Any
) -> Iterator[Alone]:
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    where = {"listen" if service == "edge" else "metrics_listen": listen(port)}
    config = write_config(
        folder / "ezat.toml", **{service: {**sections.pop(service, {}), **where}}, **sections
    )
    nats_url, nats = start_nats(folder)
    log = folder / f"{service}.log"
    full = {
        **os.environ,
        **env,
        "NATS_URL": nats_url,
        "EZAT_CONFIG": str(config),
        "PYTHONUNBUFFERED": "1",
    }
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", module], env=full, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        yield Alone(base_url(port), nats, proc, log)
    finally:
        stop_process(proc)
        stop_process(nats)
