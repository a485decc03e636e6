"""Edge wiring: connect NATS, build the endpoints with what they need, serve HTTP, stop.

The database pool is the one connection made in the background: PostgreSQL may come up after the
edge, and until it does only key checks wait for it (auth.py). Endpoints: handlers.py (API),
operations.py (health, this edge's readiness, metrics), status.py (the operator's view of the
whole stack); every response passes middleware.py.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import asyncpg
from aiohttp import web
from ezat_common import bus, db, lifecycle, logs, preflight, readiness, tracing
from ezat_common.catalogue import Catalogue
from ezat_common.config import Config, load_config, split_listen
from ezat_common.config_reload import Reloader
from ezat_common.subjects import Subjects, from_env
from ezat_common.tasks import stop_task
from nats.aio.msg import Msg

from . import admin as admin_api
from . import console_web, listener, reloading
from . import metrics as m
from .answers import answers_mw
from .auth import Authenticator
from .budgets import Budgets
from .core.admission import Admission
from .core.body_bytes import BodyBytes
from .core.deadlines import first_reply_timeout
from .core.hold import Worst
from .core.model_label import ModelLabels
from .deliveries import Deliveries
from .front import Front
from .handlers import Api, ModelLists
from .holds import HoldStore
from .key_expiry import KeyExpiry
from .limits import RateLimiter
from .middleware import Handler, errors_mw, on_prepare
from .operations import Operations
from .protocol import ConnectionGuard, EdgeRunner, close_gently, connection_budget
from .relay import Relay
from .request_log import RequestLog, request_log_mw
from .status import StackStatus
from .stored_responses import StoredResponses

log = logging.getLogger("ezat.edge")

# How long a starting edge waits for its database pool before it accepts connections anyway.
DB_WAIT = 5.0
# Connections of the stored-responses pool (GET/DELETE /openai/v1/responses/{id}).
STORE_CONNECTIONS = 8


@dataclass(slots=True)
class Edge:
    """A connected edge: its endpoints and what ``stop`` closes."""

    nc: bus.Client
    relay: Relay
    deliveries: Deliveries
    auth: Authenticator
    limiter: RateLimiter
    admission: Admission
    api: Api
    ops: Operations
    status: StackStatus
    pool_task: asyncio.Task[None]
    stored: StoredResponses
    key_expiry: KeyExpiry
    admin: admin_api.Admin
    request_log: RequestLog
    console: console_web.Console
    front: Front = field(default_factory=Front)  # GET / and /openapi.yaml: no connection

    async def stop(self) -> None:
        await self.ops.readiness.stop()
        await self.key_expiry.stop()
        await stop_task(self.pool_task)
        # Usage of requests whose client left is still being confirmed: NATS must stay up.
        await self.relay.holder.settle()
        await self.deliveries.stop()
        await self.request_log.stop()
        await self.nc.drain()
        for pool in (self.auth.pool, self.stored.pool):
            if pool is not None:
                await pool.close()
        await self.limiter.close()
        await self.admin.close()


# Every route the edge serves; docs/openapi.yaml documents exactly these
# (tests/e2e/test_openapi.py).
ROUTES: tuple[tuple[str, str, Callable[[Edge], Handler]], ...] = (
    ("POST", "/v1/messages", lambda e: e.api.create_message),
    ("POST", "/v1/messages/count_tokens", lambda e: e.api.count_tokens),
    ("GET", "/v1/models", lambda e: e.api.list_models),
    ("POST", "/openai/v1/chat/completions", lambda e: e.api.chat_completions),
    ("POST", "/openai/v1/responses", lambda e: e.api.create_response),
    ("GET", "/openai/v1/responses/{response_id}", lambda e: e.stored.get),
    ("DELETE", "/openai/v1/responses/{response_id}", lambda e: e.stored.delete),
    ("GET", "/openai/v1/models", lambda e: e.api.list_models),
    ("GET", "/api/models", lambda e: e.api.public_models),
    ("GET", "/api/usage", lambda e: e.api.usage),
    ("GET", "/api/status", lambda e: e.status.handle),
    ("GET", "/healthz", lambda e: e.ops.healthz),
    ("GET", "/readyz", lambda e: e.ops.readyz),
    ("GET", "/metrics", lambda e: e.ops.metrics_endpoint),
    *((verb, path, lambda e, n=name: getattr(e.admin, n)) for verb, path, name in admin_api.ROUTES),
    # For whoever opens the edge's address: no key, no token (front.py).
    ("GET", "/", lambda e: e.front.index),
    ("GET", "/openapi.yaml", lambda e: e.front.openapi_yaml),
    # The operators' web console (console_web.py, docs/console.md).
    *(
        (verb, path, lambda e, n=name: getattr(e.console, n))
        for verb, path, name in console_web.ROUTES
    ),
)


async def connect(cfg: Config, subjects: Subjects) -> Edge:
    """The edge with its NATS connection made and its database pool on its way."""
    # What needs no connection first: a catalogue that cannot load stops the edge before it
    # connects anywhere.
    catalogue = Catalogue(cfg)
    models = ModelLists.of(catalogue)
    m.prepare(model.id for model in catalogue.models)
    auth = Authenticator(cfg.edge.auth_cache_ttl)
    limiter = RateLimiter.from_env()
    admission = Admission(cfg.edge.max_in_flight)
    m.IN_FLIGHT.set_function(lambda: admission.in_flight)
    body_bytes = BodyBytes(cfg.edge.body_bytes_in_flight, cfg.edge.body_bytes_in_flight_per_key)
    m.BODY_BYTES.set_function(lambda: body_bytes.held)
    instance = uuid.uuid4().hex[:12]
    # Key changes broadcast while this edge was disconnected never arrive: every cached key is
    # looked up again on its next use.
    nc = await bus.connect(f"edge-{instance}", "edge", on_reconnected=auth.missed_broadcasts)
    inbox = bus.Inbox(nc, subjects, f"edge.{instance}")
    await inbox.start()
    claims = bus.Claims(nc, subjects, "edge")
    await claims.open()
    deliveries = Deliveries(nc, subjects)
    deliveries.start()
    relay = Relay(
        nc,
        subjects,
        inbox,
        claims,
        first_reply_timeout=first_reply_timeout(cfg),
        ping_interval=cfg.edge.ping_interval,
        deliveries=deliveries,
        stream_buffer_bytes=cfg.edge.stream_buffer_bytes,
    )
    m.STREAM_BUFFERED.set_function(relay.outlets.held)
    m.STREAM_BUFFERED_MAX.set_function(relay.outlets.largest)

    async def on_revoked(msg: Msg) -> None:
        auth.evict(msg.data.decode())

    async def on_changed(msg: Msg) -> None:
        auth.heard_change(msg.data, msg.subject)

    await nc.subscribe(subjects.keys_revoked, cb=on_revoked)
    await nc.subscribe(subjects.keys_changed, cb=on_changed)
    holds = HoldStore.from_env(limiter.keys)  # None without Redis: the spend alone decides
    api = Api(
        cfg.edge,
        nc,
        subjects,
        relay,
        auth,
        limiter,
        Budgets(subjects, holds=holds, enforcement=cfg.edge.budget_enforcement),
        admission,
        models,
        ModelLabels(catalogue),
        body_bytes,
        Worst(catalogue),
    )
    ops = Operations(nc, auth)
    admin = admin_api.Admin(nc, subjects, catalogue, auth)
    status = StackStatus(nc, subjects, ops, limiter.redis, sessions=admin.sessions)
    stored = StoredResponses(auth, limiter, models.access)
    pool_task = asyncio.create_task(_connect_db(auth, stored, cfg.edge.auth_db_connections))
    key_expiry = KeyExpiry(auth, cfg.edge.key_expiry_teams, cfg.edge.key_expiry_interval)
    key_expiry.start()
    # Accept only once keys can be checked: a restarted edge takes over the connections waiting
    # on its socket, and answering them "authentication is unavailable" because its pool was
    # still connecting would be an error nobody needed. A database that is down does not hold
    # the edge back for longer.
    await asyncio.wait({pool_task}, timeout=DB_WAIT)
    request_log = RequestLog(cfg.edge.request_log_days, cfg.edge.request_log_rows)
    request_log.start()
    return Edge(
        nc,
        relay,
        deliveries,
        auth,
        limiter,
        admission,
        api,
        ops,
        status,
        pool_task,
        stored,
        key_expiry,
        admin,
        request_log,
        console_web.Console(admin.sessions),
    )


async def _connect_db(auth: Authenticator, stored: StoredResponses, auth_size: int) -> None:
    """Two pools: key lookups on ``auth_size`` connections of their own, stored responses on
    ``STORE_CONNECTIONS``; a flood of stored-response reads then waits on its own pool and never
    holds the connections another tenant's key lookup needs."""
    # PostgreSQL may come up after us; keep trying instead of failing the pod.
    while True:
        try:
            # Key lookups first: every request waits for them, only stored responses for the
            # other.
            if auth.pool is None:
                auth.pool = await db.pool(min_size=1, max_size=auth_size)
            stored.pool = await db.pool(min_size=1, max_size=STORE_CONNECTIONS)
            return
        except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            log.warning("database not reachable yet: %s", type(exc).__name__)
            await asyncio.sleep(1)


def build(edge: Edge) -> web.Application:
    cfg = edge.api.cfg
    # Outermost: what errors_mw answers is written within the deadline too.
    written = answers_mw(cfg.unread_answer_grace, cfg.body_min_rate)
    # Outermost of all: a request's log entry ends once its answer is written.
    logged = request_log_mw(edge.request_log)
    app = web.Application(middlewares=[logged, written, errors_mw], client_max_size=1024**3)
    app.on_response_prepare.append(on_prepare)
    app.add_routes([web.route(method, path, get(edge)) for method, path, get in ROUTES])
    return app


def handler_args(cfg: Config) -> dict[str, float]:
    """aiohttp's own connection settings: the idle keep-alive timeout."""
    return {"keepalive_timeout": cfg.edge.keepalive_timeout}


async def serve(edge: Edge, cfg: Config) -> tuple[EdgeRunner, int]:
    """The edge's HTTP server on ``edge.listen``: returns the runner and the bound port."""
    wanted = cfg.edge.max_connections
    guard = ConnectionGuard(
        max_connections=connection_budget(wanted), header_timeout=cfg.edge.header_timeout
    )
    if guard.max_connections < wanted:
        log.warning(
            "max_connections lowered to %d by the file limit (RLIMIT_NOFILE)",
            guard.max_connections,
        )
    runner = EdgeRunner(
        build(edge),
        guard=guard,
        handler_cancellation=True,
        access_log=None,
        **handler_args(cfg),
    )
    await runner.setup()
    host, port = split_listen(cfg.edge.listen)
    try:
        await listener.site(runner, host, port).start()
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        await runner.cleanup()
        raise preflight.PortInUse(
            preflight.in_use_message("edge.listen", cfg.edge.listen)
        ) from None
    bound = runner.addresses[0][1] if port == 0 else port
    return runner, bound


async def main(stop: asyncio.Event) -> None:
    logs.setup("edge")
    tracing.setup("edge")
    cfg = load_config()
    edge = await connect(cfg, from_env())
    apply = reloading.applier(edge.api, edge.admin.catalogue)
    Reloader("edge", cfg, apply).install(asyncio.get_running_loop())
    runner, port = await serve(edge, cfg)
    host, _ = split_listen(cfg.edge.listen)
    log.info("edge listening on http://%s:%d", host, port)
    readiness.serve(cfg.edge.metrics_listen, edge.ops.readiness)
    lifecycle.announce_ready()
    await stop.wait()
    # Drain: stop accepting (a replacement on the same socket takes the new connections), let
    # open streams finish (bounded), then close connections.
    await edge.ops.readiness.stop()
    lifecycle.announce_draining()
    await close_gently(runner)
    await runner.shutdown()
    await runner.cleanup()
    await edge.stop()
    tracing.shutdown()
