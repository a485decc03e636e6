"""Forwarding one upstream response to the client's reply subject (``Forwarder``).

The streaming loop is thin: read whatever has arrived, parse it (``core.sse``), run the pure
step (``core.stream``), publish the result as ONE ``ReplyChunk`` per read. Coalescing is only of
what already arrived; the loop never waits for more. The first read's bytes ride in ``ReplyHead``
(headers and data in one publish): from then on the response belongs to this deployment (no
failover). message_stop goes out as ``ReplyEnd`` at once, carrying its usage record, while the
outbox acknowledges the record to the edge that holds the final event (``ezat_common.settling``);
with no edge to hold it, only once the record is durable.

Every method returns ``None`` once it published the final reply, or an ``AttemptFailure`` for the
router to fail over on (if nothing was sent yet) or to report.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from ezat_common import envelopes
from ezat_common.bus import Claims, ack_subject_of
from ezat_common.config import RouterConfig
from ezat_common.envelopes import (
    CONVERTED,
    UNRECORDED,
    ReplyBody,
    ReplyChunk,
    ReplyEnd,
    ReplyHead,
    RouteRequest,
    UsageRecord,
)
from ezat_common.pricing import COST_HEADER, FREE, Pricer, cost_micros, usd, usd_text
from ezat_common.sse import SseError
from ezat_http1 import Response, UpstreamError
from nats.aio.client import Client

from . import metrics
from .core import timeouts
from .core.accounting import UsageAccumulator
from .core.counting import UPSTREAM_HEADERS
from .core.payload import (
    PayloadError,
    message_delta_frame,
    read_response,
    with_response_model,
)
from .core.stream import StepResult, StreamStep
from .core.upstream_errors import AttemptFailure, TransportKind, from_stream_error, from_transport
from .upstream import Endpoint, Upstream
from .usage_sink import UsageSink

if TYPE_CHECKING:
    from opentelemetry.trace import Span

UNRECORDED_ATTEMPT = AttemptFailure(error=UNRECORDED, retryable=False, reason="unrecorded")
_encode = envelopes.encode


class RequestState:
    """What one request has done so far; the router reads it when the request is cancelled."""

    __slots__ = (
        "attempt_span",
        "attempts",
        "endpoint",
        "final_sent",
        "first_token_at",
        "head_sent",
        "reply_headers",
        "sent",
        "traceparent",
        "upstream_started_at",
        "usage",
    )

    def __init__(self, traceparent: str | None = None) -> None:
        # What the upstream and the usage record carry on: the routing span's context with
        # tracing on, else the client's as received (None: no header at all).
        self.traceparent = traceparent
        self.attempt_span: Span | None = None  # tracing on: the attempt under way
        self.attempts = 0
        self.endpoint: Endpoint | None = None
        self.usage = UsageAccumulator()
        self.upstream_started_at = 0.0
        self.first_token_at = 0.0
        self.head_sent = False
        self.final_sent = False
        # Chunks published after the head (ReplyChunk.seq of the last one).
        self.sent = 0
        # x-ezat-* headers of the attempt under way (deployment, region, affinity outcome).
        self.reply_headers: dict[str, str] = {}

    @property
    def deployment(self) -> str:
        return self.endpoint.dep.name if self.endpoint is not None else ""


def usage_base(req: RouteRequest, state: RequestState, finished_at: float) -> UsageRecord:
    """The record's identity and timings; token counts come from the accumulator."""
    dep = state.endpoint.dep if state.endpoint is not None else None
    return UsageRecord(
        request_id=req.request_id,
        uid=req.uid,
        key_id=req.key_id,
        model=req.model,
        api=req.api,
        stream=req.stream,
        status="complete",
        deployment=dep.name if dep is not None else "",
        region=dep.routing_region if dep is not None else "",
        deployment_kind=dep.kind if dep is not None else "",
        received_at=req.received_at,
        upstream_started_at=state.upstream_started_at,
        first_token_at=state.first_token_at,
        finished_at=finished_at,
        attribution=req.attribution,
    )


class Forwarder:
    def __init__(
        self,
        nc: Client,
        claims: Claims,
        upstream: Upstream,
        usage_sink: UsageSink,
        cfg: RouterConfig,
        clock: Callable[[], float],
        pricer: Pricer,
    ) -> None:
        self._nc = nc
        self._pricer = pricer
        self._claims = claims
        self._upstream = upstream
        self._usage_sink = usage_sink
        self._cfg = cfg
        self._clock = clock

    def use(self, cfg: RouterConfig) -> None:
        """A config reload: the router's per-request limits for the next requests."""
        self._cfg = cfg

    async def stream(
        self,
        req: RouteRequest,
        state: RequestState,
        endpoint: Endpoint,
        resp: Response,
        first_event_by: float,
    ) -> AttemptFailure | None:
        """Relay a 2xx event stream; ``first_event_by`` (event-loop time) is when its first event
        (``message_start``) must have arrived (``timeouts.first_byte_bound`` after the attempt
        began)."""
        result, broken = await self._pump(req, state, endpoint, resp, first_event_by)
        # Release the upstream connection before waiting on billing: a stream that finished
        # keeps it for its HTTP end (then pooled); anything else aborts it.
        if result is not None and result.finished and not result.invalid:
            resp.release_when_complete()
        else:
            resp.release()
        model = req.response_model
        if broken == "timeout":  # nothing usable yet: failed over like a slow first byte
            bound = timeouts.first_byte_bound(self._cfg, stream=True, api=req.api)
            return from_transport("timeout", model, bound)
        if broken == "stalled":
            return from_transport("stalled", model, self._cfg.between_events_timeout)
        if result is None or not result.finished:
            return from_transport("dropped", model, self._cfg.between_events_timeout)
        if result.invalid:
            return from_transport("protocol", model, self._cfg.between_events_timeout)
        if result.error is not None:
            return from_stream_error(
                result.error, cooldown_default=self._cfg.cooldown_default_seconds
            )
        stop, delta = result.stop, result.delta
        assert stop is not None

        def end(micros: int) -> bytes:  # the held message_delta, with the cost, then the stop
            return stop if delta is None else message_delta_frame(delta, usd(micros)) + stop

        return await self._complete(req, state, ReplyEnd(data=b"", seq=state.sent + 1), end)

    async def _pump(
        self,
        req: RouteRequest,
        state: RequestState,
        endpoint: Endpoint,
        resp: Response,
        first_event_by: float,
    ) -> tuple[StepResult | None, TransportKind | None]:
        """Read until the stream finishes, breaks or ends early (an unfinished result). The
        second value says how it broke: ``timeout`` (no message_start by ``first_event_by``),
        ``stalled`` (silent for ``between_events_timeout`` after it), ``dropped`` (the
        connection broke, or the bytes were not SSE)."""
        # Server-Sent Events, or Bedrock's event stream turned into the same events.
        parser = endpoint.stream_parser(self._claims.inline_limit)
        step = StreamStep(req.response_model, state.usage)
        publish = self._nc.publish
        reply_to = req.reply_to
        read = resp.readany
        loop = asyncio.get_running_loop()
        between = self._cfg.between_events_timeout
        result: StepResult | None = None
        metrics.ACTIVE_STREAMS.inc()
        try:
            async with asyncio.timeout(None) as deadline:
                while True:
                    # Until message_start, one deadline from the attempt's start (pings before
                    # it do not extend it); after it, each read gets ``between`` seconds.
                    deadline.reschedule(loop.time() + between if step.started else first_event_by)
                    chunk = await read()
                    if not chunk:
                        return result, None  # EOF before message_stop
                    result = step.step(parser.feed(chunk))
                    if result.events:
                        metrics.RELAYED_EVENTS.inc(result.events)
                    if result.unknown:
                        metrics.UNKNOWN_EVENTS.inc(result.unknown)
                    if result.first_delta and not state.first_token_at:
                        state.first_token_at = self._clock()
                    if result.data:
                        if state.head_sent:
                            state.sent += 1
                            part = ReplyChunk(data=result.data, seq=state.sent)
                            await publish(reply_to, _encode(part))
                        else:
                            head = ReplyHead(headers=state.reply_headers, data=result.data)
                            await publish(reply_to, _encode(head))
                            state.head_sent = True
                    if result.finished:
                        return result, None
        except TimeoutError:
            return result, "stalled" if step.started else "timeout"
        except (UpstreamError, SseError):
            return None, "dropped"  # connection dropped, or garbage
        finally:
            metrics.ACTIVE_STREAMS.dec()

    async def body(
        self, req: RouteRequest, state: RequestState, endpoint: Endpoint, resp: Response
    ) -> AttemptFailure | None:
        """A non-streamed response (messages or count_tokens)."""
        try:
            data = await self._upstream.read_body(resp)
        except UpstreamError:
            return from_transport("dropped", req.response_model, self._cfg.between_events_timeout)
        except TimeoutError:  # headers came, then the body stopped (nothing was sent yet)
            return from_transport("stalled", req.response_model, self._cfg.between_events_timeout)
        resp.release()
        state.first_token_at = self._clock()
        if req.api == "count_tokens":
            # Free and not billed: relayed as is (in the Anthropic API's shape), no usage
            # record, no model rewrite.
            data = endpoint.count_answer(data)
            headers = {**state.reply_headers, **UPSTREAM_HEADERS}  # a deployment counted
            reply = ReplyBody(status=resp.status, headers=headers)
            reply.data, reply.data_ref = await self._claims.pack_reply(data, req.reply_to)
            await self._nc.publish(req.reply_to, _encode(reply))
            state.final_sent = True
            return None
        try:
            document, usage, content = read_response(data)
        except PayloadError:
            return from_transport("protocol", req.response_model, self._cfg.between_events_timeout)
        state.usage.feed_response(usage, content, document.get("stop_reason"))

        def out(micros: int) -> bytes:
            # The translator turns a converted API's body into its own object with its own
            # model field and cost (from the header): the upstream bytes are relayed as they are.
            if req.api in CONVERTED:
                return data
            return with_response_model(document, req.response_model, usd(micros))

        return await self._complete(
            req, state, ReplyBody(status=resp.status, headers=state.reply_headers), out
        )

    async def _complete(
        self,
        req: RouteRequest,
        state: RequestState,
        final: ReplyEnd | ReplyBody,
        data: Callable[[int], bytes],
    ) -> AttemptFailure | None:
        """Send the final reply carrying its record, which the outbox acknowledges to the edge
        holding it (``publish_held``); with no edge reply subject, or the outbox unreachable,
        make the record durable here first (docs/billing.md). The record is priced here, its
        prices kept in it for billing's row, and ``data`` makes the final bytes with its cost
        (micro-dollars; docs/billing.md, "Cost in the answer")."""
        record = state.usage.record(usage_base(req, state, self._clock()), "complete")
        record.prices = self._pricer.prices(record) or FREE
        micros = cost_micros(record, record.prices)
        final.data = data(micros)
        if isinstance(final, ReplyBody):
            final.headers = {**final.headers, COST_HEADER: usd_text(micros)}
        edge = req.client_reply_to
        sink = self._usage_sink
        held = (
            await sink.publish_held(record, ack_subject_of(edge), state.traceparent)
            if edge
            else None
        )
        if held is not None:
            final.usage = held
        elif not await sink.record(record, state.traceparent):
            return UNRECORDED_ATTEMPT
        if isinstance(final, ReplyBody):
            final.data, final.data_ref = await self._claims.pack_reply(final.data, req.reply_to)
        await self._nc.publish(req.reply_to, _encode(final))
        state.final_sent = True
        return None
