"""One request from RouteRequest to its final reply: candidates, attempts, failover, cancel.

Failover happens only before the first byte reached the client (``ReplyHead``): on connect
errors, timeouts before the headers (or, for a stream, before its first event), a 2xx that is
not an event stream / JSON (an HTML page), 429, 5xx, 529 and the other failures
``core.upstream_errors`` marks retryable. After exhausting ``max_attempts`` the last failure is
what the client gets. A cancelled request closes its upstream connection (the ``finally`` in
``_attempt``) and records ``client_closed`` usage in the background (``UsageSink.record_later``,
retried until durable) since nobody waits for it; ``count_tokens`` is never recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping

from ezat_common import envelopes, lifecycle, logs, tracing
from ezat_common.bus import Claims
from ezat_common.config import Config, DeploymentConfig
from ezat_common.envelopes import Reply, ReplyBody, ReplyError, RouteRequest
from ezat_common.errors import model_not_found
from ezat_http1 import Response, UpstreamError
from nats.aio.client import Client

from . import metrics, spans
from .core import counting, health, selection, timeouts
from .core.accounting import UsageAccumulator
from .core.payload import PayloadError
from .core.retry_budget import RetryBudget
from .core.upstream_errors import AttemptFailure, all_down, from_status, from_transport
from .credentials import CredentialsUnavailable
from .forwarder import Forwarder, RequestState, usage_base
from .shared_state import SharedState
from .upstream import Endpoint, Signer, Upstream, UpstreamUnavailable
from .usage_sink import UsageSink

log = logging.getLogger("ezat.router")

INTERNAL = ReplyError(
    status=500, type="api_error", message="the gateway failed on this request; retry"
)
# Only this much of a refused upstream body is decoded (an error body is small).
ERROR_BODY_LIMIT = 64 * 1024


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
        self._nc = nc
        self._claims = claims
        self._upstream = upstream
        self._usage_sink = usage_sink
        self._shared = shared
        self._clock = clock
        self._forwarder = Forwarder(nc, claims, upstream, usage_sink, cfg.router, clock)
        self._deployments = selection.by_model(cfg.deployments)
        signers = signers or {}
        self._endpoints = {
            dep.name: Endpoint(dep, signers.get(dep.name)) for dep in cfg.deployments
        }
        self._series = {
            name: metrics.DeploymentSeries(name, e.kind) for name, e in self._endpoints.items()
        }
        metrics.watch_health(cfg.deployments, shared.health, clock)
        self._max_attempts = max(cfg.router.max_attempts, 1)
        self._budget = RetryBudget(
            cfg.router.retry_budget_ratio, cfg.router.retry_budget_min_per_second, clock()
        )
        # Requests in flight per deployment from this replica (least-outstanding balance).
        self._outstanding: dict[str, int] = {}
        # Set at shutdown: requests cancelled from then on are told to retry, not billed.
        self.stopping = False
        # Deployments whose model refused to count (core/counting): not asked again.
        self._cannot_count: set[str] = set()

    async def run(self, req: RouteRequest, traceparent: str | None = None) -> None:
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
            outcome = await self._cancelled(req, state, gateway="gateway" in exc.args)
            raise
        except Exception:
            log.exception("request failed inside the router")
            outcome = "internal_error"
            if not state.final_sent:
                with contextlib.suppress(Exception):
                    await self._publish(req, INTERNAL)
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
        deployments = self._deployments.get(req.model)
        if not deployments:
            await self._publish(req, model_not_found(req.response_model).reply)
            state.final_sent = True
            return "no_deployment"
        if req.api == "count_tokens":
            estimate = req.input_estimate
            deployments = counting.counters(deployments, self._cannot_count, estimate=estimate)
            if not deployments and estimate is not None:
                return await self._estimated(req, state, estimate, "none")
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
                return await self._all_down(req, state, deployments, planned.outcome, now)
        failure, served = await self._try_in_order(
            req, state, decision, planned, (kind, bound), order, body
        )
        if not state.attempts:  # every candidate's probe was taken by another replica
            return await self._all_down(req, state, deployments, planned.outcome, now)
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
            return await self._estimated(req, state, req.input_estimate, decision.affinity)
        return await self._report(req, state, failure)

    async def _estimated(
        self, req: RouteRequest, state: RequestState, estimate: int, affinity: str
    ) -> str:
        """No deployment of the model can count: the translator's estimate, said to be one, with
        no ``x-ezat-deployment`` (none counted) and this router's region."""
        headers = counting.estimate_headers(self._region, affinity)
        body = counting.estimate_body(estimate)
        await self._publish(req, ReplyBody(status=200, headers=headers, data=body))
        state.final_sent = True
        metrics.COUNT_ESTIMATES.inc()
        return counting.ESTIMATED

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
            endpoint = self._endpoints[dep.name]
            state.reply_headers = {**endpoint.reply_headers, "x-ezat-affinity": affinity}
            decision.affinity = affinity
            failure = await self._attempt(req, state, endpoint, body)
            if failure is not None and failure.reason == counting.CANNOT_COUNT:
                self._note_cannot_count(endpoint)
            self._record_health(dep.name, failure, state)
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

    async def _report(self, req: RouteRequest, state: RequestState, failure: AttemptFailure) -> str:
        """The last failure goes to the client; a stream that broke is recorded as failed."""
        await self._publish(req, failure.error.with_headers(state.reply_headers))
        state.final_sent = True
        if state.head_sent and req.api != "count_tokens":
            # The stream started and broke: recorded as failed (not billed) for the usage list.
            record = state.usage.record(
                usage_base(req, state, self._clock()), "failed", failure.error.type
            )
            self._usage_sink.record_later(record, state.traceparent)
        return failure.reason

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

    async def _all_down(
        self,
        req: RouteRequest,
        state: RequestState,
        deployments: tuple[DeploymentConfig, ...],
        affinity: str,
        now: float,
    ) -> str:
        """Every deployment rests and no attempt is allowed: 429 when they are all rate limited,
        else 529, with retry-after until the first one may be tried again."""
        metrics.ALL_DOWN.labels(req.model).inc()
        states = [self._shared.health(d.name) for d in deployments]
        wait = min(health.recovers_at(h, now) for h in states) - now
        all_limited = all(h.open_until <= now and h.cooldown_until > now for h in states)
        reply = all_down(req.response_model, wait, all_limited=all_limited)
        headers = {"x-ezat-region": self._region, "x-ezat-affinity": affinity}
        await self._publish(req, reply.with_headers(headers))
        state.final_sent = True
        return "all_down"

    async def _attempt(
        self, req: RouteRequest, state: RequestState, endpoint: Endpoint, body: bytes
    ) -> AttemptFailure | None:
        state.attempts += 1
        state.endpoint = endpoint
        state.usage = usage = UsageAccumulator()
        traceparent = state.traceparent
        if tracing.ENABLED:
            state.attempt_span = spans.attempt(state, endpoint)
            traceparent = tracing.traceparent(state.attempt_span)
        try:
            head, payload = endpoint.request(req, body, traceparent)
        except CredentialsUnavailable:
            # Expired and not yet refreshed: this deployment cannot be called now; another can.
            bad = from_status(
                403,
                b"",
                None,
                req.response_model,
                cooldown_default=self._cfg.cooldown_default_seconds,
            )
            if state.attempt_span is not None:
                spans.end_attempt(state, bad, "")
            return bad
        except PayloadError:
            bad = AttemptFailure(error=INTERNAL, retryable=False, reason="bad_body")
            if state.attempt_span is not None:
                spans.end_attempt(state, bad, "")
            return bad
        except ValueError:  # a header value that would break the request head: never sent
            bad = AttemptFailure(error=INTERNAL, retryable=False, reason="bad_header")
            if state.attempt_span is not None:
                spans.end_attempt(state, bad, "")
            return bad
        # Counted once the attempt ends, whichever way: its outcome, and the input tokens the
        # deployment reported (in message_start or the body) once per attempt, not per event.
        series = self._series[endpoint.dep.name]
        failure: AttemptFailure | None = None
        broke = "internal_error"  # how the attempt ended without an outcome ("": it has one)
        try:
            failure = await self._send(req, state, endpoint, head, payload)
            broke = ""
        except asyncio.CancelledError:
            series.cancelled()
            broke = "cancelled"
            raise
        finally:
            series.prompt(usage)
            if state.attempt_span is not None:
                spans.end_attempt(state, failure, broke)
        series.attempted(failure)
        return failure

    async def _send(
        self,
        req: RouteRequest,
        state: RequestState,
        endpoint: Endpoint,
        head: bytes,
        payload: bytes,
    ) -> AttemptFailure | None:
        """The attempt on the wire: headers, then the stream or body relayed (``Forwarder``)."""
        state.upstream_started_at = started = self._clock()
        tick = time.perf_counter()
        name = endpoint.dep.name
        events = timeouts.streams_events(req.stream, req.api)
        bound = timeouts.first_byte_bound(self._cfg, stream=req.stream, api=req.api)
        # A stream must also have sent its first event by then (relay.stream).
        first_event_by = asyncio.get_running_loop().time() + bound
        self._outstanding[name] = self._outstanding.get(name, 0) + 1
        metrics.OUTSTANDING_BY(name).inc()
        try:
            try:
                resp = await self._upstream.open(endpoint, head, payload, bound)
            except UpstreamUnavailable as exc:
                return from_transport(exc.kind, req.response_model, bound)
            first_byte = time.perf_counter() - tick
            if state.attempt_span is None:
                self._series[name].first_byte.observe(first_byte)
            else:  # the attempt's trace as the exemplar (OpenMetrics), Grafana's link to it
                span = state.attempt_span
                span.set_attribute("ezat.upstream.first_byte_seconds", first_byte)
                self._series[name].first_byte.observe(first_byte, tracing.exemplar(span))
            try:
                if resp.status >= 300:
                    return await self._refused(req, endpoint, resp)
                content_type = resp.headers.get("content-type")
                if not timeouts.content_type_ok(events, content_type, endpoint.events_type):
                    # A 200 HTML page (a proxy's, a portal's) or JSON for a stream: nothing of
                    # it is the answer. Known from the headers, so nothing is read or sent.
                    return from_transport("protocol", req.response_model, bound)
                self._shared.succeeded(name, started)
                if events:
                    return await self._forwarder.stream(req, state, endpoint, resp, first_event_by)
                return await self._forwarder.body(req, state, endpoint, resp)
            finally:
                # On every exit, cancellation included: an unread response closes its
                # connection, which is how the deployment learns the client went away.
                resp.release()
        finally:
            self._outstanding[name] -= 1
            metrics.OUTSTANDING_BY(name).dec()

    async def _refused(
        self, req: RouteRequest, endpoint: Endpoint, resp: Response
    ) -> AttemptFailure:
        """A non-2xx answer; its (small) body says why, in its kind's error shape."""
        try:
            data = await self._upstream.read_body(resp)
        except (UpstreamError, TimeoutError):  # the status alone still says enough
            data = b""
        data = data[:ERROR_BODY_LIMIT]
        answer = endpoint.error_answer(resp.status, resp.headers, data)
        failure = from_status(
            answer.status,
            answer.body,
            answer.retry_after,
            req.response_model,
            cooldown_default=self._cfg.cooldown_default_seconds,
        )
        if req.api == "count_tokens" and endpoint.count_refused(resp.status, resp.headers, data):
            return counting.refusal(failure)
        return failure

    async def _cancelled(self, req: RouteRequest, state: RequestState, gateway: bool) -> str:
        """The client went away, the edge failed the request (``gateway``: a process relaying it
        died), or the replica is stopping: record what was consumed."""
        if state.final_sent:
            return "ok"
        if self.stopping:
            with contextlib.suppress(Exception):  # NATS may already be going away
                await self._publish(req, lifecycle.RESTARTING)
            status: envelopes.UsageStatus = "failed"
            outcome = "shutdown"
        elif gateway:
            status, outcome = "failed", "relay_lost"  # not charged (docs/billing.md)
        else:
            status, outcome = "client_closed", "client_closed"
        # count_tokens is free and never recorded (docs/billing.md), cancelled or not.
        if state.upstream_started_at and req.api != "count_tokens":
            record = state.usage.record(usage_base(req, state, self._clock()), status)
            self._usage_sink.record_later(record, state.traceparent)
        return outcome

    async def _publish(self, req: RouteRequest, reply: Reply) -> None:
        await self._nc.publish(req.reply_to, envelopes.encode(reply))
