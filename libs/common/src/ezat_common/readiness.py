"""Each process's own readiness and liveness, and the metrics port that Kubernetes probes.

``/readyz`` answers for this process and what it needs itself (its NATS connection and
subscriptions, its own stores), never for other services: one missing replica elsewhere must not
take every pod out of its Service (docs/reliability.md, "Readiness"). A service gives
``Readiness`` a check returning ``{name: "ok" | what is wrong}``; names in ``optional`` are
reported but never make it unready (the router's Redis: routing goes on from hashing). The same
verdict answers the NATS health probe (``bus.serve_health``, which the edge's ``/api/status``
collects) and feeds ``ezat_ready``.

Router, translator, billing and fetcher serve ``/readyz``, ``/healthz`` and ``/metrics`` on their
``metrics_listen`` port (``serve``), from a thread of its own as prometheus-client's server does.
``/readyz`` and ``/healthz`` run on the service's event loop with a deadline: liveness is "the
loop answers", whatever PostgreSQL, Redis or NATS do. The edge serves the same verdict on its own
HTTP port (ezat_edge.operations).
"""

from __future__ import annotations

import asyncio
import errno
import functools
import logging
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Collection, Iterable
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import msgspec
from prometheus_client import make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

from . import metrics
from .config import split_listen
from .periodic import Periodic

log = logging.getLogger("ezat.readiness")

OK = "ok"
# A check that takes longer is a failed one (a probe's own timeout is 3 s in deploy/k8s).
CHECK_TIMEOUT = 2.0
# The loop must answer /healthz within this long, or the process counts as hung.
LOOP_TIMEOUT = 2.5
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

_Start = Callable[[str, list[tuple[str, str]]], Any]
_App = Callable[[dict[str, Any], _Start], Iterable[bytes]]


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # probes every 5 s: not logged
        pass


def _on_loop(loop: asyncio.AbstractEventLoop, make: Callable[[], Awaitable[Any]]) -> Any:
    async def run() -> Any:
        return await make()

    return asyncio.run_coroutine_threadsafe(run(), loop).result(LOOP_TIMEOUT + CHECK_TIMEOUT)


def probes(readiness: Readiness, loop: asyncio.AbstractEventLoop, inner: _App) -> _App:
    """A WSGI app answering ``/readyz`` and ``/healthz`` from ``loop``, the rest by ``inner``."""

    async def alive() -> None:
        return None

    def app(environ: dict[str, Any], start: _Start) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path not in ("/readyz", "/healthz"):
            return inner(environ, start)
        try:
            if path == "/readyz":
                status, body = readiness.body(_on_loop(loop, readiness.evaluate))
            else:
                asyncio.run_coroutine_threadsafe(alive(), loop).result(LOOP_TIMEOUT)
                status, body = 200, b'{"status":"ok"}'
        except (FutureTimeout, TimeoutError, RuntimeError):  # RuntimeError: the loop is closed
            status, body = 503, b'{"status":"event loop not responding"}'
        reason = "OK" if status == 200 else "Service Unavailable"
        start(f"{status} {reason}", [("Content-Type", "application/json")])
        return [body]

    return app


def serve(listen: str | None, readiness: Readiness) -> WSGIServer | None:
    """``/metrics``, ``/readyz`` and ``/healthz`` on ``listen`` (a service's ``metrics_listen``),
    from a thread of its own; called from the service's event loop. The server is returned for
    whoever wants to stop it (a test)."""
    if not listen:
        return None
    host, port = split_listen(listen)

    class Server(ThreadingWSGIServer):
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

    app = probes(readiness, asyncio.get_running_loop(), make_wsgi_app())
    try:
        server = make_server(host, port, app, Server, handler_class=_Quiet)
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        # A rolling restart's replacement takes work while its predecessor drains, and the
        # predecessor holds the port until it exits: bind it then, from a thread, instead of
        # crashing the replacement (its own work does not need the port).
        log.info("metrics port %s in use (a predecessor draining?): binding it when free", listen)
        bind = functools.partial(make_server, host, port, app, Server, handler_class=_Quiet)
        threading.Thread(
            target=_bind_when_free, args=(bind,), name="ezat-metrics", daemon=True
        ).start()
        return None
    threading.Thread(target=server.serve_forever, name="ezat-metrics", daemon=True).start()
    return server


BIND_RETRY = 0.1  # seconds between attempts to bind a port a predecessor holds


def _bind_when_free(bind: Callable[[], WSGIServer]) -> None:
    while True:
        time.sleep(BIND_RETRY)
        try:
            server = bind()
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                continue
            log.error("metrics port could not be bound: %s", exc)
            return
        log.info("metrics port bound")
        server.serve_forever()
        return
