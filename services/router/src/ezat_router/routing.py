"""One request from RouteRequest to its final reply: candidates, attempts, failover, cancel.

Failover happens only before the first byte reached the client (``ReplyHead``): on connect
errors, timeouts before the headers, 429, 5xx, 529 and the other failures
``core.upstream_errors`` marks retryable. After exhausting ``max_attempts`` the last failure is
what the client gets. A cancelled request closes its upstream connection (the ``finally`` in
``_attempt``) and records ``client_closed`` usage, fire-and-forget since nobody waits for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

import aiohttp
from ezat_common import envelopes, logs
from ezat_common.bus import Claims
from ezat_common.config import Config
from ezat_common.envelopes import Reply, ReplyError, RouteRequest
from ezat_common.errors import model_not_found
from nats.aio.client import Client

from . import metrics
from .billing import Billing
from .core import selection
from .core.health import HealthView
from .core.payload import PayloadError, with_model
from .core.upstream_errors import Failure, from_status, from_transport
from .core.usage import UsageAccumulator
from .relay import Relay, RequestState, usage_base
from .upstream import Target, Upstream, UpstreamUnavailable, finish

log = logging.getLogger("ezat.router")

SHUTDOWN = ReplyError(
    status=529,
    type="overloaded_error",
    message="the gateway is restarting and could not finish this response; retry",
    retry_after=1.0,
)
INTERNAL = ReplyError(
    status=500, type="api_error", message="the gateway failed on this request; retry"
)
# Only this much of a refused upstream body is decoded (an error body is small).
ERROR_BODY_LIMIT = 64 * 1024


class Router:
    def __init__(
        self,
        cfg: Config,
        nc: Client,
        claims: Claims,
        upstream: Upstream,
        billing: Billing,
        health: HealthView,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._cfg = cfg.router
        self._nc = nc
        self._claims = claims
        self._upstream = upstream
        self._billing = billing
        self._health = health
        self._clock = clock
        self._relay = Relay(nc, claims, upstream, billing, cfg.router, clock)
        self._deployments = selection.by_model(cfg.deployments)
        self._targets = {dep.name: Target(dep) for dep in cfg.deployments}
        self._max_attempts = max(cfg.router.max_attempts, 1)
        # Set at shutdown: requests cancelled from then on are told to retry, not billed.
        self.stopping = False

    async def run(self, req: RouteRequest) -> None:
        """The whole request; the body of its task."""
        logs.request_id.set(req.request_id)
        state = RequestState()
        outcome = "error"
        try:
            outcome = await self._route(req, state)
        except asyncio.CancelledError:
            outcome = await self._cancelled(req, state)
            raise
        except Exception:
            log.exception("request failed inside the router")
            outcome = "internal_error"
            if not state.final_sent:
                with contextlib.suppress(Exception):
                    await self._publish(req, INTERNAL)
        finally:
            metrics.REQUESTS.labels(state.deployment, outcome).inc()
            log.info(
                "routed",
                extra={
                    "fields": {
                        "deployment": state.deployment,
                        "attempts": state.attempts,
                        "outcome": outcome,
                    }
                },
            )

    async def _route(self, req: RouteRequest, state: RequestState) -> str:
        body = await self._claims.unpack(req.body, req.body_ref)
        state.body_len = len(body)
        deployments = self._deployments.get(req.model)
        if not deployments:
            err = model_not_found(req.response_model)
            reply = ReplyError(
                status=err.status,
                type=err.type,
                message=err.message,
                param=err.param,
                code=err.code,
            )
            await self._publish(req, reply)
            state.final_sent = True
            return "no_deployment"
        now = self._clock()
        order = selection.ordered(
            deployments,
            self._cfg.region,
            req.session_key or req.request_id,
            lambda name: self._health.is_cooling(name, now),
        )
        failure: Failure | None = None
        for dep in order[: self._max_attempts]:
            if failure is not None and state.target is not None:
                metrics.FAILOVERS.labels(state.target.dep.name, failure.reason).inc()
            failure = await self._attempt(req, state, self._targets[dep.name], body)
            if failure is None:
                return "ok"
            if failure.cooldown is not None:
                self._health.failed(dep.name, self._clock(), failure.cooldown)
            if not failure.retryable or state.head_sent:
                break
        assert failure is not None
        await self._publish(req, failure.error)
        state.final_sent = True
        if state.head_sent:
            # The stream started and broke: recorded as failed (not billed) for the usage list.
            record = state.usage.record(
                usage_base(req, state, self._clock()), "failed", state.body_len, failure.error.type
            )
            self._billing.record_later(record)
        return failure.reason

    async def _attempt(
        self, req: RouteRequest, state: RequestState, target: Target, body: bytes
    ) -> Failure | None:
        state.attempts += 1
        state.target = target
        state.usage = UsageAccumulator()
        try:
            payload = with_model(target.prefix, body)
        except PayloadError:
            return Failure(error=INTERNAL, retryable=False, reason="bad_body")
        url = target.count_url if req.api == "count_tokens" else target.messages_url
        state.upstream_started_at = started = self._clock()
        tick = time.perf_counter()
        try:
            resp = await self._upstream.open(url, payload, target.request_headers(req))
        except UpstreamUnavailable as exc:
            return from_transport(exc.kind, req.response_model, self._cfg.first_byte_timeout)
        metrics.FIRST_BYTE.labels(target.dep.name).observe(time.perf_counter() - tick)
        try:
            if resp.status >= 300:
                return await self._refused(req, resp)
            self._health.succeeded(target.dep.name, started)
            if req.stream and req.api != "count_tokens":
                return await self._relay.stream(req, state, target, resp)
            return await self._relay.body(req, state, target, resp)
        finally:
            # On every exit, cancellation included: an unread response closes its connection,
            # which is how the deployment learns the client went away.
            finish(resp)

    async def _refused(self, req: RouteRequest, resp: aiohttp.ClientResponse) -> Failure:
        """A non-2xx answer; its (small) body says why."""
        try:
            data = await self._upstream.read_body(resp)
        except (aiohttp.ClientError, TimeoutError):  # the status alone still says enough
            data = b""
        return from_status(
            resp.status,
            data[:ERROR_BODY_LIMIT],
            resp.headers.get("retry-after"),
            req.response_model,
        )

    async def _cancelled(self, req: RouteRequest, state: RequestState) -> str:
        """The client went away (or the replica is stopping): record what was consumed."""
        if state.final_sent:
            return "ok"
        if self.stopping:
            with contextlib.suppress(Exception):  # NATS may already be going away
                await self._publish(req, SHUTDOWN)
            status: envelopes.UsageStatus = "failed"
            outcome = "shutdown"
        else:
            status, outcome = "client_closed", "client_closed"
        if state.upstream_started_at:
            record = state.usage.record(
                usage_base(req, state, self._clock()), status, state.body_len
            )
            self._billing.record_later(record)
        return outcome

    async def _publish(self, req: RouteRequest, reply: Reply) -> None:
        await self._nc.publish(req.reply_to, envelopes.encode(reply))
