"""One request from RouteRequest to its final reply: candidates, attempts, failover, cancel.

Failover happens only before the first byte reached the client (``ReplyHead``): on connect
errors, timeouts before the headers (or, for a stream, before its first event), a 2xx that is
not an event stream / JSON (an HTML page), 429, 5xx, 529 and the other failures
``core.upstream_errors`` marks retryable. After exhausting ``max_attempts`` the last failure is
what the client gets. Each attempt is ``attempt.Attempts.try_deployment``. A cancelled request
closes its upstream connection (the ``finally`` of the attempt) and records ``client_closed``
usage in the background (``UsageSink.record_later``, retried until durable) since nobody waits
for it; ``count_tokens`` is never recorded. The replies the router sends itself (an estimate,
all down, the last failure, a cancel's record) are ``own_replies.OwnReplies``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping

from ezat_common import logs, tracing
from ezat_common.bus import Claims
from ezat_common.catalogue import Catalogue
from ezat_common.config import Config, DeploymentConfig
from ezat_common.envelopes import RouteRequest
from ezat_common.errors import model_not_found
from ezat_common.pricing import Pricer
from nats.aio.client import Client

from . import metrics, spans
from .attempt import INTERNAL, Attempts
from .core import counting, health, selection, server_tools
from .core.dropped import DroppedLog
from .core.retry_budget import RetryBudget
from .core.upstream_errors import AttemptFailure
from .forwarder import Forwarder, RequestState
from .own_replies import OwnReplies
from .shared_state import SharedState
from .upstream import Endpoint, Signer, Upstream
from .usage_sink import UsageSink

log = logging.getLogger("ezat.router")


class Decision:
    """How the request was routed, for the log line and the metrics."""

    __slots__ = ("affinity", "home")

    def __init__(self) -> None:
        self.affinity = ""
        self.home = ""


class Router:
    def __init__(
        self,
        cfg: Config,
        nc: Client,
        claims: Claims,
        upstream: Upstream,
        usage_sink: UsageSink,
        shared: SharedState,
        region: str | None = None,
        clock: Callable[[], float] = time.time,
        signers: Mapping[str, Signer] | None = None,
    ) -> None:
        self._cfg = cfg.router
        self._region = region or cfg.router.region
        self._claims = claims
        self._upstream = upstream
        self._shared = shared
        self._clock = clock
        self._deployments = selection.by_model(cfg.deployments)
        self._signers = signers = signers or {}
        self._endpoints = self._endpoints_of(cfg, {})
        metrics.watch_health(cfg.deployments, shared.health, clock)
        self._max_attempts = max(cfg.router.max_attempts, 1)
        self._budget = RetryBudget(
            cfg.router.retry_budget_ratio, cfg.router.retry_budget_min_per_second, clock()
        )
        # Requests in flight per deployment from this replica (least-outstanding balance),
        # counted by the attempts.
        self._outstanding: dict[str, int] = {}
        self._catalogue = Catalogue(cfg)
        pricer = Pricer(self._catalogue)  # the answers' cost_usd (docs/billing.md)
        forwarder = Forwarder(nc, claims, upstream, usage_sink, cfg.router, clock, pricer)
        self._forwarder = forwarder
        self._replies = OwnReplies(nc, usage_sink, shared, self._region, clock)
        self._attempts = Attempts(
            cfg.router, upstream, forwarder, shared, self._endpoints, self._outstanding, clock
        )
        # Set at shutdown: requests cancelled from then on are told to retry, not billed.
        self.stopping = False
        # Deployments whose model refused to count (core/counting): not asked again.
        self._cannot_count: set[str] = set()

    def _endpoints_of(self, cfg: Config, kept: Mapping[str, Endpoint]) -> dict[str, Endpoint]:
        """An endpoint per deployment of ``cfg``: ``kept``'s own for one unchanged."""
        out = {}
        for dep in cfg.deployments:
            old = kept.get(dep.name)
            if old is not None and old.dep == dep:
                out[dep.name] = old
                continue
            dropped = DroppedLog(cfg.router.dropped_log_capacity, cfg.router.dropped_log_interval)
            out[dep.name] = Endpoint(dep, self._signers.get(dep.name), dropped)
        return out

    def reload(self, cfg: Config) -> None:
        """A config reload (``ezat_common.config_reload``): deployments, prices and the limits
        read per request, for the next requests. Everything is built first, then assigned with
        nothing awaited between; a request in flight keeps the order and endpoints it took. The
        health of a deployment that stays (breaker, cooldown) is kept: it is kept by name."""
        endpoints = self._endpoints_of(cfg, self._endpoints)
        gone = [e.dep for e in self._endpoints.values() if endpoints.get(e.dep.name) is not e]
        deployments = selection.by_model(cfg.deployments)
        Catalogue(cfg)  # what cannot be built raises here, before anything is replaced
        self._catalogue.replace(cfg)
        self._deployments = deployments
        self._endpoints = endpoints
        self._cfg = cfg.router
        self._max_attempts = max(cfg.router.max_attempts, 1)
        self._attempts.use(cfg.router, endpoints)
        self._forwarder.use(cfg.router)
        self._upstream.use(cfg.router)
        self._shared.set_deployments([d.name for d in cfg.deployments])
        self._cannot_count = {n for n in self._cannot_count if n in endpoints}
        metrics.unwatch_health(gone)  # removed, or changed (its model may be another)
        metrics.watch_health(cfg.deployments, self._shared.health, self._clock)

    async def route(self, req: RouteRequest, traceparent: str | None = None) -> None:
        """The whole request; the body of its task. ``traceparent``: what its NATS message
        carried (docs/observability.md, "Traces")."""
        logs.request_id.set(req.request_id)
        span = spans.routing(req, traceparent) if tracing.ENABLED else None
        state = RequestState(traceparent if span is None else tracing.traceparent(span))
        decision = Decision()
        outcome = "error"
        try:
            outcome = await self._route(req, state, decision)
        except asyncio.CancelledError as exc:
            outcome = await self._replies.cancelled(
                req, state, gateway="gateway" in exc.args, stopping=self.stopping
            )
            raise
        except Exception:
            log.exception("request failed inside the router")
            outcome = "internal_error"
            if not state.final_sent:
                with contextlib.suppress(Exception):
                    await self._replies.publish(req, INTERNAL)
        finally:
            metrics.REQUESTS_BY(state.deployment, outcome).inc()
            if decision.affinity:
                metrics.AFFINITY_BY(decision.affinity).inc()
            if span is not None:
                spans.end_routing(span, state, outcome, decision.affinity)
            log.info(
                "routed",
                extra={
                    "fields": {
                        "deployment": state.deployment,
                        "attempts": state.attempts,
                        "outcome": outcome,
                        "affinity": decision.affinity,
                        "home": decision.home,
                        "region": self._region,
                    }
                },
            )

    def _session_ttl(self, req: RouteRequest) -> float:
        if req.cache_ttl == "1h":
            return float(self._cfg.session_ttl_1h_seconds)
        return float(self._cfg.session_ttl_seconds)

    async def _route(self, req: RouteRequest, state: RequestState, decision: Decision) -> str:
        body = await self._claims.unpack(req.body, req.body_ref)
        deployments, refused = await self._candidates(req, state, body)
        if refused:
            return refused
        if req.api == "count_tokens":
            estimate = req.input_estimate
            deployments = counting.counters(deployments, self._cannot_count, estimate=estimate)
            if not deployments and estimate is not None:
                return await self._replies.estimated(req, state, estimate, "none")
        kind, key, bound, ttl = await self._affinity(req)
        now = self._clock()
        self._budget.deposit(now)
        shared = self._shared
        planned = selection.plan(
            deployments,
            local_region=self._region,
            kind=kind,
            key=key,
            bound=bound,
            available=lambda name: shared.availability(name, now),
            outstanding=lambda name: self._outstanding.get(name, 0),
            recovers_at=lambda name: health.recovers_at(shared.health(name), now),
            spill=self._cfg.prefix_spill_outstanding,
        )
        decision.affinity = planned.outcome
        decision.home = planned.order[0].name if planned.order else ""
        order = list(planned.order)
        if not order:
            # Every deployment rests. One last-resort attempt (health may be a moment stale,
            # and a retry-after is a hint), if the retry budget allows; else refuse at once.
            if planned.resting and self._budget.try_spend(now):
                order = planned.resting[:1]
            else:
                if planned.resting:
                    metrics.RETRY_BUDGET_EXHAUSTED.inc()
                return await self._replies.all_down(req, state, deployments, planned.outcome, now)
        failure, served = await self._try_in_order(
            req, state, decision, planned, (kind, bound), order, body
        )
        if not state.attempts:  # every candidate's probe was taken by another replica
            return await self._replies.all_down(req, state, deployments, planned.outcome, now)
        if (
            kind == "session"
            and served is not None
            and served != bound
            and req.api != "count_tokens"
        ):
            # (A count reads no cache: it never moves a session's home.)
            assert req.session_key is not None
            shared.bind_later(req.model, req.session_key, served, ttl)
        if failure is None:
            return "ok"
        if counting.answers_estimate(failure, req.input_estimate):
            assert req.input_estimate is not None
            return await self._replies.estimated(req, state, req.input_estimate, decision.affinity)
        return await self._replies.report(req, state, failure)

    async def _candidates(
        self, req: RouteRequest, state: RequestState, body: bytes
    ) -> tuple[tuple[DeploymentConfig, ...], str]:
        """The model's deployments that can serve ``body``; or none, the client already
        answered, and the outcome to log (an unknown model; a server tool no kind of the
        model's deployments runs: core/server_tools.py)."""
        deployments = self._deployments.get(req.model)
        if not deployments:
            await self._replies.publish(req, model_not_found(req.response_model, req.api).reply)
            state.final_sent = True
            return (), "no_deployment"
        tools = server_tools.requested(body)
        able = server_tools.able(deployments, tools)
        if not able:
            refusal = server_tools.unavailable(tools[0], req.response_model, deployments)
            await self._replies.publish(req, refusal.reply)
            state.final_sent = True
            return (), "server_tool_unavailable"
        return able, ""

    async def _affinity(self, req: RouteRequest) -> tuple[selection.Kind, str, str | None, float]:
        """The affinity kind, its key, the session's stored home (if any) and the binding TTL."""
        ttl = self._session_ttl(req)
        if req.session_key:
            bound = await self._shared.binding(req.model, req.session_key, ttl)
            return "session", req.session_key, bound, ttl
        if req.prefix_hash and req.cache_ttl and req.api != "count_tokens":
            # Prefix affinity only matters when the request reads or writes a cache.
            return "prefix", req.prefix_hash, None, ttl
        return "none", req.request_id, None, ttl

    async def _try_in_order(
        self,
        req: RouteRequest,
        state: RequestState,
        decision: Decision,
        planned: selection.Plan,
        affinity_of: tuple[selection.Kind, str | None],
        order: list[DeploymentConfig],
        body: bytes,
    ) -> tuple[AttemptFailure | None, str | None]:
        """Attempts down the planned order until one serves (or must not be failed over)."""
        shared = self._shared
        failure: AttemptFailure | None = None
        for dep in order:
            if state.attempts >= self._max_attempts:
                break
            if state.attempts and not self._budget.try_spend(self._clock()):
                metrics.RETRY_BUDGET_EXHAUSTED.inc()
                break
            probe = shared.availability(dep.name, self._clock()) == "half_open"
            if probe and not await shared.claim_probe(dep.name, self._clock()):
                continue  # another request probes it
            if failure is not None and state.endpoint is not None:
                metrics.FAILOVERS.labels(state.endpoint.dep.name, failure.reason).inc()
            affinity = selection.outcome_of(planned, *affinity_of, dep.name)
            endpoint = self._endpoints.get(dep.name)
            if endpoint is None:
                continue  # removed by a reload since this request planned its order
            state.reply_headers = {**endpoint.reply_headers, "x-ezat-affinity": affinity}
            decision.affinity = affinity
            failure = await self._attempts.try_deployment(req, state, endpoint, body)
            if failure is not None and failure.reason == counting.CANNOT_COUNT:
                self._note_cannot_count(endpoint)
            self._record_health(dep.name, failure, state)
            if failure is not None:
                _log_failed_attempt(dep.name, state.attempts, failure)
            if failure is None or not failure.retryable or state.head_sent:
                return failure, dep.name
        return failure, None

    def _note_cannot_count(self, endpoint: Endpoint) -> None:
        """Remembered for this process (a deployment's model does not learn to count), logged
        once with the deployment's name; never the body."""
        if endpoint.dep.name not in self._cannot_count:
            self._cannot_count.add(endpoint.dep.name)
            log.warning(
                "deployment %s (%s, model id %s) cannot count tokens: count_tokens requests go "
                "to the model's other deployments, else get the translator's estimate",
                endpoint.dep.name,
                endpoint.kind,
                endpoint.dep.model_id or endpoint.dep.upstream_model or endpoint.dep.model,
            )

    def _record_health(
        self, name: str, failure: AttemptFailure | None, state: RequestState
    ) -> None:
        """What the attempt says about the deployment (success is noted at the headers)."""
        if failure is None:
            return
        now = self._clock()
        if failure.rate_limited:
            self._shared.rate_limited(name, now, failure.cooldown)
        elif failure.fault:
            self._shared.failed(name, now)
        elif not state.head_sent:
            # A 4xx is a working deployment's answer: as good as a success for its health.
            self._shared.succeeded(name, state.upstream_started_at)


def _log_failed_attempt(deployment: str, attempt: int, failure: AttemptFailure) -> None:
    """One line per failed attempt (docs/observability.md, "Router"): the deployment, the
    upstream's status (None: it never answered) and the reason; never the body."""
    err = failure.error
    log.info(
        "attempt failed",
        extra={
            "fields": {
                "deployment": deployment,
                "attempt": attempt,
                "upstream_status": err.upstream_status,
                "reason": failure.reason,
                "error_type": err.type,
                "status": err.status,
                "retryable": failure.retryable,
            }
        },
    )
