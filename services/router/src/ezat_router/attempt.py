"""One attempt of a request on one deployment (docs/routing.md, "One request"): its kind's
request head and body (``Endpoint.request``), the call within the first-byte bound, the answer
refused (non-2xx, in its kind's error shape) or relayed (``Forwarder``), and what the attempt
counts: outcome, first byte, prompt tokens, in-flight requests. ``routing.Router`` decides
which deployments are tried, in which order, and what the client gets in the end.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping

from ezat_common import tracing
from ezat_common.config import RouterConfig
from ezat_common.envelopes import ReplyError, RouteRequest
from ezat_http1 import Response, UpstreamError

from . import metrics, spans
from .core import counting, timeouts
from .core.accounting import UsageAccumulator
from .core.payload import PayloadError
from .core.upstream_errors import AttemptFailure, from_status, from_transport
from .credentials import CredentialsUnavailable
from .forwarder import Forwarder, RequestState
from .shared_state import SharedState
from .upstream import Endpoint, Upstream, UpstreamUnavailable

INTERNAL = ReplyError(
    status=500, type="api_error", message="the gateway failed on this request; retry"
)
# Only this much of a refused upstream body is decoded (an error body is small).
ERROR_BODY_LIMIT = 64 * 1024


class Attempts:
    """Attempts on the router's deployments; ``outstanding`` is the router's own dict of
    requests in flight per deployment, which its selection reads."""

    def __init__(
        self,
        cfg: RouterConfig,
        upstream: Upstream,
        forwarder: Forwarder,
        shared: SharedState,
        endpoints: Mapping[str, Endpoint],
        outstanding: dict[str, int],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._cfg = cfg
        self._upstream = upstream
        self._forwarder = forwarder
        self._shared = shared
        self._outstanding = outstanding
        self._clock = clock
        self._series = {
            name: metrics.DeploymentSeries(name, e.kind) for name, e in endpoints.items()
        }

    def use(self, cfg: RouterConfig, endpoints: Mapping[str, Endpoint]) -> None:
        """A config reload: the limits and the deployments of the next attempts. The series of
        a removed deployment stay (an attempt in flight may still count in them)."""
        self._cfg = cfg
        for name, e in endpoints.items():
            if name not in self._series:
                self._series[name] = metrics.DeploymentSeries(name, e.kind)

    async def try_deployment(
        self, req: RouteRequest, state: RequestState, endpoint: Endpoint, body: bytes
    ) -> AttemptFailure | None:
        """One attempt of ``req`` on ``endpoint``'s deployment: None when it succeeded, else
        why it failed (the caller fails over on a retryable failure)."""
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
