"""Each process's own readiness and liveness, and the metrics port that Kubernetes probes.

``/readyz`` answers for this process and what it needs itself (its NATS connection and
subscriptions, its own stores), never for other services: one missing replica elsewhere must not
take every pod out of its Service (docs/reliability.md, "Readiness"). A service gives
``Readiness`` a check returning ``{name: "ok" | what is wrong}``; names in ``optional`` are
reported but never make it unready (the router's Redis: routing goes on from hashing). The same
verdict answers the NATS health probe (``bus.serve_health``, which the edge's ``/api/status``
collects) and feeds ``ezat_ready``.

Router, translator, billing and fetcher serve ``/readyz``, ``/healthz`` and ``/metrics`` on their
``metrics_listen`` port (``serve``), on the service's event loop with bounded connections
(``metrics_port``): liveness is "the loop answers", whatever PostgreSQL, Redis or NATS do (a hung
loop answers nothing, and the probe's own timeout fails it). The edge serves the same verdict on
its own HTTP port (ezat_edge.operations).
"""

from __future__ import annotations

import asyncio
import errno
import logging
from collections.abc import Awaitable, Callable, Collection
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import msgspec

from . import environment, metrics, metrics_port, preflight
from .periodic import Periodic

log = logging.getLogger("ezat.readiness")

OK = "ok"
# A check that takes longer is a failed one (a probe's own timeout is 3 s in deploy/k8s).
CHECK_TIMEOUT = 2.0
# ``ezat_ready`` is at most this old while nothing probes the process.
REFRESH_EVERY = 2.0

Checks = Callable[[], Awaitable[dict[str, str]]]


class Readiness:
    """The one verdict of this process: ``evaluate`` runs the check, keeps the result
    (``last``) and sets ``ezat_ready``."""

    def __init__(self, service: str, optional: Collection[str] = ()) -> None:
        self.service = service
        self.optional = frozenset(optional)
        self.draining = False  # set when the process stops taking work: not ready any more
        self.last: dict[str, str] = {"process": "starting"}
        self._checks: Checks | None = None
        self._refresh = Periodic(f"{service}-readiness", REFRESH_EVERY, self.evaluate)
        metrics.READY.set(0)

    def use(self, checks: Checks) -> None:
        """The service is wired: judge it by ``checks`` from now on (and every few seconds,
        so that ``ezat_ready`` follows without a probe). Called from the event loop."""
        self._checks = checks
        self._refresh.start()

    async def stop(self) -> None:
        self.draining = True
        await self._refresh.stop()
        metrics.READY.set(0)

    def ok(self, checks: dict[str, str]) -> bool:
        return all(v == OK or k in self.optional for k, v in checks.items())

    async def evaluate(self) -> dict[str, str]:
        if self._checks is None:
            result = {"process": "starting"}
        else:
            try:
                result = await asyncio.wait_for(self._checks(), CHECK_TIMEOUT)
            except TimeoutError:
                result = {"checks": f"no verdict within {CHECK_TIMEOUT:g} s"}
        if self.draining:
            result = {**result, "process": "draining"}
        self.last = result
        metrics.READY.set(1 if self.ok(result) else 0)
        return result

    async def problem(self) -> str | None:
        """None when ready, else what is wrong: the NATS health probe's answer."""
        result = await self.evaluate()
        wrong = [f"{k}: {v}" for k, v in result.items() if v != OK and k not in self.optional]
        return "; ".join(wrong) or None

    def body(self, checks: dict[str, str]) -> tuple[int, bytes]:
        """The HTTP status and JSON body of ``/readyz`` for ``checks``."""
        ready = self.ok(checks)
        payload = {"status": "ready" if ready else "not ready", "checks": checks}
        return (200 if ready else 503), msgspec.json.encode(payload)


def nats_check(nc: Any, *subscriptions: Any) -> dict[str, str]:
    """The NATS part every service shares: connected, and subscribed to its work (None: not
    yet, or no more; a stop drains them after ``Readiness.stop`` said "draining")."""
    if nc is None or not nc.is_connected:
        return {"nats": "not connected"}
    if not subscriptions or any(sub is None for sub in subscriptions):
        return {"nats": OK, "subscriptions": "not subscribed"}
    return {"nats": OK, "subscriptions": OK}


# ---- the metrics port --------------------------------------------------------------------------

JSON = "application/json"
# /metrics is rendered off the loop (a scrape's text takes milliseconds the requests need), by
# one thread: scrapes are few, so one at a time, and the process never has more threads for it.
_RENDER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ezat-metrics")


def answers(readiness: Readiness) -> metrics_port.Answer:
    """What the metrics port answers: ``/readyz`` (the verdict), ``/healthz`` (served by the
    event loop, so an answer at all is the loop's liveness), ``/metrics``."""

    async def answer(path: str, accept: str | None) -> tuple[int, str, bytes]:
        if path == "/readyz":
            status, body = readiness.body(await readiness.evaluate())
            return status, JSON, body
        if path == "/healthz":
            return 200, JSON, b'{"status":"ok"}'
        if path == "/metrics":
            loop = asyncio.get_running_loop()
            text, content_type = await loop.run_in_executor(_RENDER, metrics.exposition, accept)
            return 200, content_type, text
        return 404, JSON, b'{"status":"not found: /metrics, /readyz or /healthz"}'

    return answer


def serve(listen: str | None, readiness: Readiness) -> metrics_port.MetricsPort | None:
    """``/metrics``, ``/readyz`` and ``/healthz`` on ``listen`` (a service's ``metrics_listen``)
    on the running event loop, bounded (``metrics_port``: ``EZAT_METRICS_MAX_CONNECTIONS``,
    ``EZAT_METRICS_TIMEOUT``). None when nothing is served now: no ``listen``, or its port is
    held by a predecessor (then it is bound once free).

    Only a process under a supervisor (``EZAT_DRAIN_DIR`` set: ``ezat up``) can have a
    predecessor draining on its port; anywhere else (a pod, ``ezat serve``) the port in use is
    another program's, and the start stops with ``PortInUse`` naming the key."""
    if not listen:
        return None
    port = metrics_port.MetricsPort(
        answers(readiness), environment.metrics_max_connections(), environment.metrics_timeout()
    )
    supervised = environment.drain_dir() is not None
    try:
        bound = port.bind(listen, wait_if_taken=supervised)
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        key = f"{readiness.service}.metrics_listen"
        raise preflight.PortInUse(preflight.in_use_message(key, listen)) from None
    _SERVING.append(port)  # kept for the process's life, whoever drops the returned value
    return port if bound else None


_SERVING: list[metrics_port.MetricsPort] = []
