"""Edge wiring: HTTP routes, request ids, auth, limits, and start-up/shut-down of connections."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable

import asyncpg
import msgspec
from aiohttp import http_exceptions, web
from aiohttp.web_protocol import RequestPayloadError
from ezat_common import bus, db, envelopes, lifecycle, logs, metrics
from ezat_common.catalogue import Catalogue
from ezat_common.config import Config, load_config, split_listen
from ezat_common.errors import GatewayError
from ezat_common.subjects import from_env
from nats.aio.msg import Msg

from . import listener
from . import metrics as m
from .auth import Authenticator, ascii_header
from .bodies import read_limited
from .budgets import Budgets
from .deliveries import Deliveries
from .ids import new_uid, request_id
from .limits import RateLimiter
from .protocol import RID, SERVER, ConnectionGuard, EdgeRunner, close_gently, connection_budget
from .relay import Call, Relay
from .responses import JSON, Format, from_gateway_error
from .usage import usage_query

log = logging.getLogger("ezat.edge")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
PROBED_SERVICES = ("translator", "router", "billing", "fetcher")
# How long a starting edge waits for its database pool before it accepts connections anyway.
DB_WAIT = 5.0
# Seconds an overloaded edge asks clients to wait (retry-after) before trying again.
OVERLOAD_RETRY_AFTER = 1


def api_format(path: str) -> Format:
    return "openai" if path.startswith("/openai/") else "anthropic"


class Edge:
    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.catalogue = Catalogue(cfg)
        self.subjects = from_env()
        self.auth = Authenticator(cfg.edge.auth_cache_ttl)
        self.limiter = RateLimiter.from_env()
        self.budgets = Budgets(self.subjects)
        self.instance = f"edge-{uuid.uuid4().hex[:12]}"
        self.models_anthropic = self.catalogue.anthropic_list()
        self.models_openai = self.catalogue.openai_list()
        self.models_public = self.catalogue.public()
        self.nc: bus.Client | None = None
        self.relay: Relay | None = None
        self.deliveries: Deliveries | None = None
        # Model requests in flight; beyond max_in_flight a new one is refused at once.
        self.in_flight = 0
        self.max_in_flight = cfg.edge.max_in_flight
        m.IN_FLIGHT.set_function(lambda: self.in_flight)
        self._pool_task: asyncio.Task[None] | None = None

    # ---- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        self.nc = await bus.connect(self.instance)
        inbox = bus.Inbox(self.nc, self.subjects, self.instance)
        await inbox.start()
        self.deliveries = Deliveries(self.nc, self.subjects)
        self.deliveries.start()
        self.relay = Relay(
            self.nc,
            self.subjects,
            inbox,
            bus.Claims(self.nc, self.subjects),
            first_reply_timeout=first_reply_timeout(self.cfg),
            ping_interval=self.cfg.edge.ping_interval,
            deliveries=self.deliveries,
            stream_buffer_bytes=self.cfg.edge.stream_buffer_bytes,
        )
        outlets = self.relay.outlets
        m.STREAM_BUFFERED.set_function(outlets.held)
        m.STREAM_BUFFERED_MAX.set_function(outlets.largest)
        await self.nc.subscribe(self.subjects.keys_revoked, cb=self._on_revoked)
        self._pool_task = asyncio.create_task(self._connect_db())
        # Accept only once keys can be checked: a restarted edge takes over the connections
        # waiting on its socket, and answering them "authentication is unavailable" because
        # its pool was still connecting would be an error nobody needed. A database that is
        # down does not hold the edge back for longer.
        await asyncio.wait({self._pool_task}, timeout=DB_WAIT)

    async def _connect_db(self) -> None:
        # PostgreSQL may come up after us; keep trying instead of failing the pod.
        while True:
            try:
                self.auth.pool = await db.pool(min_size=1, max_size=8)
                return
            except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                log.warning("database not reachable yet: %s", type(exc).__name__)
                await asyncio.sleep(1)

    async def stop(self) -> None:
        if self._pool_task is not None:
            self._pool_task.cancel()
        if self.relay is not None:
            # Usage of requests whose client left is still being confirmed: NATS must stay up.
            await self.relay.holder.settle()
        if self.deliveries is not None:
            await self.deliveries.stop()
        if self.nc is not None:
            await self.nc.drain()
        if self.auth.pool is not None:
            await self.auth.pool.close()
        await self.limiter.close()

    async def _on_revoked(self, msg: Msg) -> None:
        self.auth.evict(msg.data.decode())

    # ---- middleware -----------------------------------------------------------------------

    @web.middleware
    async def errors_mw(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        rid = request_id(request.headers.get("x-request-id"))
        request[RID] = rid
        token = logs.request_id.set(rid)
        fmt = api_format(request.path)
        try:
            return await handler(request)
        except GatewayError as err:
            resp = from_gateway_error(fmt, rid, err)
            if err.status == 408:
                resp.force_close()  # the rest of the body may still be on its way
            return resp
        except web.HTTPException as exc:
            if exc.status >= 400:
                refused = GatewayError(exc.status, _http_message(exc, request))
                return from_gateway_error(fmt, rid, refused)
            raise
        except asyncio.IncompleteReadError:
            return from_gateway_error(fmt, rid, GatewayError(400, "request body: is incomplete"))
        except (RequestPayloadError, http_exceptions.HttpProcessingError) as exc:
            # The body's framing was broken (bad chunked encoding, say); never its bytes.
            log.info("malformed request body: %s", type(exc).__name__)
            resp = from_gateway_error(fmt, rid, GatewayError(400, "request body: is malformed"))
            resp.force_close()
            return resp
        except Exception:
            # Never aiohttp's text/plain 500: the client gets the error format of its API.
            log.exception("request failed")
            return from_gateway_error(fmt, rid, GatewayError(500, "internal error; retry"))
        finally:
            logs.request_id.reset(token)

    @staticmethod
    async def on_prepare(request: web.Request, response: web.StreamResponse) -> None:
        headers = response.headers
        headers["server"] = SERVER  # instead of aiohttp's Python and aiohttp versions
        rid = request.get(RID)
        if rid:
            headers["request-id"] = rid
            headers["x-request-id"] = rid

    # ---- model endpoints ------------------------------------------------------------------

    async def create_message(self, request: web.Request) -> web.StreamResponse:
        return await self._model_call(request, "messages", "anthropic")

    async def count_tokens(self, request: web.Request) -> web.StreamResponse:
        return await self._model_call(request, "count_tokens", "anthropic")

    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        return await self._model_call(request, "chat", "openai")

    async def _model_call(
        self, request: web.Request, api: envelopes.Api, fmt: Format
    ) -> web.StreamResponse:
        if self.in_flight >= self.max_in_flight:
            # At once rather than queued into timeouts; admitted requests go on unaffected.
            m.OVERLOADED.inc()
            raise GatewayError(
                529,
                "the gateway is overloaded; retry shortly",
                retry_after=OVERLOAD_RETRY_AFTER,
            )
        self.in_flight += 1
        try:
            return await self._admitted_call(request, api, fmt)
        finally:
            self.in_flight -= 1

    async def _admitted_call(
        self, request: web.Request, api: envelopes.Api, fmt: Format
    ) -> web.StreamResponse:
        started = time.monotonic()
        received_at = time.time()
        rid = request[RID]
        key = await self.auth.authenticate(request)
        if api != "count_tokens" and key.monthly_budget_micros is not None:
            assert self.nc is not None
            await self.budgets.check(self.nc, key)  # 403 before anything is sent upstream
        limit_headers = await self.limiter.check(key)
        edge_cfg = self.cfg.edge
        body = await read_limited(
            request, edge_cfg.max_body_bytes, edge_cfg.body_timeout, edge_cfg.body_min_rate
        )
        if key.tpm is not None and api != "count_tokens":
            # Estimated input tokens (limits.py); count_tokens runs no model, so only its
            # request counts (RPM).
            limit_headers.update(await self.limiter.check_tokens(key, len(body), limit_headers))
        env = envelopes.ClientRequest(
            request_id=rid,
            # The request's identity inside the gateway; ``rid`` may be chosen (and reused) by
            # clients, so it never identifies a request on its own.
            uid=new_uid(),
            api=api,
            key_id=key.id,
            reply_to="",
            received_at=received_at,
            session=utf8_header(request, "x-ezat-session"),
            cache=ascii_header(request, "x-ezat-cache"),
            beta=ascii_header(request, "anthropic-beta"),
        )
        call = Call(request, rid, fmt, env, limit_headers, started)
        assert self.relay is not None
        resp = await self.relay.run(call, body)
        m.REQUESTS_BY(api, str(resp.status)).inc()
        m.LATENCY_BY(api).observe(time.monotonic() - started)
        return resp

    async def list_models(self, request: web.Request) -> web.Response:
        await self.auth.authenticate(request)
        fmt = api_format(request.path)
        body = self.models_openai if fmt == "openai" else self.models_anthropic
        return web.Response(body=body, content_type=JSON)

    async def public_models(self, request: web.Request) -> web.Response:
        return web.Response(body=self.models_public, content_type=JSON)

    async def usage(self, request: web.Request) -> web.Response:
        key = await self.auth.authenticate(request)
        assert self.nc is not None
        return await usage_query(self.nc, self.subjects, key, request)

    # ---- operations -----------------------------------------------------------------------

    async def healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def readyz(self, request: web.Request) -> web.Response:
        checks = await self.readiness()
        ready = all(v == "ok" for v in checks.values())
        body = msgspec.json.encode({"status": "ready" if ready else "not ready", "checks": checks})
        return web.Response(status=200 if ready else 503, body=body, content_type=JSON)

    async def readiness(self) -> dict[str, str]:
        checks: dict[str, str] = {}
        nc = self.nc
        checks["nats"] = "ok" if nc is not None and nc.is_connected else "not connected"
        checks["database"] = await self._db_check()
        if nc is None or not nc.is_connected:
            return checks
        results = await asyncio.gather(*(self._probe(nc, svc) for svc in PROBED_SERVICES))
        checks.update(zip(PROBED_SERVICES, results, strict=True))
        return checks

    async def _db_check(self) -> str:
        if self.auth.pool is None:
            return "not connected"
        try:
            await asyncio.wait_for(self.auth.pool.fetchval("SELECT 1"), 1.0)
            return "ok"
        except Exception as exc:
            return f"unavailable ({type(exc).__name__})"

    async def _probe(self, nc: bus.Client, service: str) -> str:
        try:
            msg = await nc.request(self.subjects.health(service), b"", timeout=1.0)
            reply = envelopes.decode_health(msg.data)
            return "ok" if reply.ok else reply.detail
        except Exception:
            return "no replica answered"

    async def metrics_endpoint(self, request: web.Request) -> web.Response:
        data, content_type = metrics.exposition()
        return web.Response(body=data, headers={"content-type": content_type})

    async def not_found(self, request: web.Request) -> web.Response:
        raise GatewayError(404, f"{request.method} {request.path}: no such endpoint")

    # ---- assembly -------------------------------------------------------------------------

    def build(self) -> web.Application:
        app = web.Application(middlewares=[self.errors_mw], client_max_size=1024**3)
        app.on_response_prepare.append(self.on_prepare)
        app.add_routes(
            [
                web.post("/v1/messages", self.create_message),
                web.post("/v1/messages/count_tokens", self.count_tokens),
                web.get("/v1/models", self.list_models),
                web.post("/openai/v1/chat/completions", self.chat_completions),
                web.get("/openai/v1/models", self.list_models),
                web.get("/api/models", self.public_models),
                web.get("/api/usage", self.usage),
                web.get("/healthz", self.healthz),
                web.get("/readyz", self.readyz),
                web.get("/metrics", self.metrics_endpoint),
            ]
        )
        return app


# Seconds past the router's worst case before a first reply (every attempt timing out) that the
# edge still waits: the router answers first (with its own error) unless it is gone.
FIRST_REPLY_MARGIN = 15.0


def first_reply_timeout(cfg: Config) -> float:
    """``edge.first_reply_timeout`` when set, else longer than the router may take to answer:
    ``max_attempts`` x (connect + first byte) plus a margin. A shorter edge timeout would show
    the client a 504 for a request the router still runs (and bills)."""
    if cfg.edge.first_reply_timeout is not None:
        return float(cfg.edge.first_reply_timeout)
    router = cfg.router
    per_attempt = router.connect_timeout + router.first_byte_timeout
    return float(max(1, router.max_attempts) * per_attempt + FIRST_REPLY_MARGIN)


def utf8_header(request: web.Request, name: str) -> str | None:
    """The header's value; a 400 naming it when its bytes are not UTF-8 (aiohttp decodes them
    with ``surrogateescape``: such a byte is a lone surrogate, which cannot be encoded)."""
    value = request.headers.get(name)
    if value is not None and not value.isascii():
        try:
            value.encode()
        except UnicodeEncodeError:
            raise GatewayError(400, f"{name}: header is not valid UTF-8") from None
    return value


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
        edge.build(),
        guard=guard,
        handler_cancellation=True,
        access_log=None,
        **handler_args(cfg),
    )
    await runner.setup()
    host, port = split_listen(cfg.edge.listen)
    await listener.site(runner, host, port).start()
    bound = runner.addresses[0][1] if port == 0 else port
    return runner, bound


def _http_message(exc: web.HTTPException, request: web.Request) -> str:
    if exc.status == 404:
        return f"{request.method} {request.path}: no such endpoint"
    if exc.status == 405:
        return f"{request.method} {request.path}: method not allowed"
    return exc.reason or "request refused"


async def main(stop: asyncio.Event) -> None:
    logs.setup("edge")
    cfg = load_config()
    edge = Edge(cfg)
    await edge.start()
    runner, port = await serve(edge, cfg)
    host, _ = split_listen(cfg.edge.listen)
    log.info("edge listening on http://%s:%d", host, port)
    lifecycle.announce_ready()
    await stop.wait()
    # Drain: stop accepting (a replacement on the same socket takes the new connections), let
    # open streams finish (bounded), then close connections.
    lifecycle.announce_draining()
    await close_gently(runner)
    await runner.shutdown()
    await runner.cleanup()
    await edge.stop()
