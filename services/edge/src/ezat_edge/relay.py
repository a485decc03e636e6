"""One client request over NATS: publish it to the translator, then turn the replies into HTTP.

Replies arrive on this process's inbox (one wildcard subscription, a queue per request). The
sequence is ``ReplyHead`` -> ``ReplyChunk``* -> a final ``ReplyEnd``/``ReplyError`` for streams, or
a single ``ReplyBody``/``ReplyError``. Chunks are written as they arrive: nothing is buffered.
A final reply carrying its usage record is released only once that record is durable
(``ezat_common.settling``, docs/billing.md).
A client that goes away cancels the handler; we broadcast a ``CancelRequest`` (carrying the
request's ``uid``, its gateway-internal identity) so the router stops the upstream call. The same
broadcast follows a first-reply timeout: the client saw a 504, so the request must not run on.

Streams have one writer, this handler's loop, which never waits for its client to read; what it
writes through (the buffer cap, pings, the watchdog) is streams.py's. A client that lets more
than ``[edge] stream_buffer_bytes`` wait at the edge has its stream cut, billed as a client that
left early (docs/reliability.md, docs/billing.md).

Liveness (docs/reliability.md): whoever holds the request (translator, router) sends a
``Heartbeat`` while it has nothing else to send, so silence for ``OWNER_TIMEOUT`` means it died.
Before any reply the request is then published once more, under a new uid, to a live replica (the
first publish is cancelled as failed: a record it left is never charged); after one, the stream
ends with an error event. A stream request whose first byte takes longer than ``ping_interval``
is committed (200 and SSE headers) on its holder's heartbeat, so pings keep the client's
connection alive while the router still tries deployments; its failure is then an in-stream
error.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable
from typing import Literal, TypeVar

from aiohttp import web
from ezat_common import bus, envelopes, tracing
from ezat_common.config import DEFAULT_STREAM_BUFFER
from ezat_common.envelopes import OWNER_LOST, UNRECORDED, ReplyBody, ReplyError, ReplyHead
from ezat_common.errors import GatewayError
from ezat_common.liveness import OWNER_TIMEOUT
from ezat_common.settling import Held, Holder
from ezat_common.subjects import Subjects
from nats.aio.msg import Msg

from . import metrics as m
from .call import Call as Call
from .call import Committed
from .deliveries import Deliveries
from .first_reply import FirstReplies, OwnerLost, decode, nobody_took
from .ids import new_uid
from .responses import JSON, reply_frame, reply_response, stream_error_frame
from .streams import (
    SSE_HEADERS,
    Collector,
    Outlet,
    Outlets,
    SseResponse,
    StreamState,
    count_events,
    has_token,
    ping_for,
    watchdog,
)

log = logging.getLogger("ezat.edge.relay")
_T = TypeVar("_T")

# How many times a request is published when its holder dies before replying: once more.
PUBLISHES = 2


class Relay:
    def __init__(
        self,
        nc: bus.Client,
        subjects: Subjects,
        inbox: bus.Inbox,
        claims: bus.Claims,
        first_reply_timeout: float,
        ping_interval: float,
        owner_timeout: float = OWNER_TIMEOUT,
        deliveries: Deliveries | None = None,
        stream_buffer_bytes: int = DEFAULT_STREAM_BUFFER,
    ) -> None:
        self.nc = nc
        self.subjects = subjects
        self.inbox = inbox
        self.claims = claims
        self.first_reply_timeout = first_reply_timeout
        self.ping_interval = ping_interval
        self.owner_timeout = owner_timeout
        self.holder = Holder(nc, subjects, inbox, m.USAGE_FALLBACKS.inc)
        self.replies = FirstReplies(
            nc, subjects, inbox, self.holder, first_reply_timeout, ping_interval, owner_timeout
        )
        self.deliveries = deliveries
        self.stream_buffer_bytes = stream_buffer_bytes
        self.outlets = Outlets()

    async def run(self, call: Call, body: bytes) -> web.StreamResponse:
        committed: Committed | None = None
        for publish in range(1, PUBLISHES + 1):
            resp = await self._attempt(call, body, publish, committed)
            if isinstance(resp, web.StreamResponse):
                return resp
            committed = resp  # None, or a stream that had sent its client nothing but pings
            m.OWNER_LOST_BY("retried").inc()
            # A router may still run the first publish (its translator died): stop it, recorded
            # failed. The next publish is a request of its own, under a uid of its own, so that
            # neither its cancels nor its record are mistaken for the first one's.
            await self._cancel(call, "gateway")
            first, call.envelope.uid = call.envelope.uid, new_uid()
            if call.republished is not None:
                await call.republished(first, call.envelope.uid)
        raise AssertionError("unreachable: the last publish always answers")

    async def _attempt(
        self, call: Call, body: bytes, publish: int, committed: Committed | None
    ) -> web.StreamResponse | Committed | None:
        """One publish of the request and its answer. None when its holder died before any
        reply, a ``Committed`` stream when it died after the stream was committed but before
        any of the answer was sent (pings only): either may be published once more. A
        committed stream's next publish goes straight to the stream loop, whose replies are
        all in-stream (its status line has left)."""
        token, subject, queue = self.inbox.open()
        held = Held(token)
        try:
            data = await self._publish(call, body, publish, subject)
            may_retry = publish < PUBLISHES
            if committed is not None:
                return await self._stream(call, None, queue, held, committed, may_retry)
            env = call.envelope
            try:
                first = await self.replies.first(call.started, queue, held)
                if nobody_took(first, env):
                    first = await self.replies.once_taken(
                        call.started, queue, held, data, subject, env, call.traceparent
                    )
            except TimeoutError:
                # The client is told it failed: stop the request so it is neither run nor billed.
                await self._cancel(call)
                return self._error(call, 504, "timeout_error", "the model took too long to answer")
            except OwnerLost:
                # With NATS itself gone, the silence is the bus's, not a holder's: publishing
                # again would only wait out another owner timeout (docs/reliability.md).
                if may_retry and self.nc.is_connected:
                    return None
                m.OWNER_LOST_BY("failed").inc()
                return self._reply_error(call, OWNER_LOST)
            return await self._answer(call, first, queue, held, may_retry)
        except asyncio.CancelledError:
            # Counted by the handler, which is cancelled wherever the client left it.
            self._delivered(call)  # the client left: what the router records is billed
            await self._cancel(call)
            raise
        finally:
            self.holder.close(queue, held)

    async def _publish(self, call: Call, body: bytes, publish: int, subject: str) -> bytes:
        """Publish the request (its replies to ``subject``); the encoded envelope, for a publish
        that nobody took to be sent again."""
        env = call.envelope
        env.reply_to = subject
        if publish == 1 or env.body_ref is not None:
            # A claim is taken (read and deleted) by its reader: a new one for each publish.
            env.body, env.body_ref = await self._claim(self.claims.pack(body, "translator"))
        data = envelopes.encode(env)
        headers = tracing.headers(call.traceparent)
        await self.nc.publish(self.subjects.translate, data, reply=subject, headers=headers)
        return data

    async def _answer(
        self,
        call: Call,
        first: envelopes.Reply | None,
        queue: asyncio.Queue[Msg],
        held: Held,
        may_retry: bool,
    ) -> web.StreamResponse | Committed:
        """The client's answer from the request's ``first`` reply (None: a stream committed on
        its holder's heartbeat before any reply)."""
        match first:
            case None:
                m.STREAMS_COMMITTED_EARLY.inc()
                return await self._stream(call, None, queue, held, None, may_retry)
            case ReplyHead():
                return await self._stream(call, first, queue, held)
            case ReplyBody():
                arrived = time.monotonic()
                if call.entry is not None:
                    call.entry.usage = first.usage
                if first.usage and not await self.holder.durable(queue, held, first.usage):
                    return self._reply_error(call, UNRECORDED)
                data = await self._claim(self.claims.unpack(first.data, first.data_ref))
                headers = {**call.extra_headers, **first.headers}
                # Written next (answers.py), or dropped unread after the grace: delivered.
                self._delivered(call)
                now = time.monotonic()
                call.meter.final_hold.observe(now - arrived)
                if 200 <= first.status < 300:
                    call.first_token = now
                return web.Response(
                    status=first.status, body=data, content_type=JSON, headers=headers
                )
            case ReplyError():
                return self._reply_error(call, first)
            case _:
                log.error("unexpected first reply %s", type(first).__name__)
                return self._error(call, 500, "api_error", "internal error; retry")

    @staticmethod
    async def _claim(op: Awaitable[_T]) -> _T:
        """An object-store operation (claim check); its failure is a 503 the client may retry."""
        try:
            return await op
        except Exception as exc:
            log.warning("object store unavailable: %s", type(exc).__name__)
            raise GatewayError(503, bus.CLAIM_UNAVAILABLE, retry_after=2) from None

    async def _stream(
        self,
        call: Call,
        head: ReplyHead | None,
        queue: asyncio.Queue[Msg],
        held: Held,
        committed: Committed | None = None,
        may_retry: bool = False,
    ) -> web.StreamResponse | Committed:
        """Relay a stream from its ``ReplyHead``; or, with None, one committed before its head
        (the head's headers are then not sent: the status line has left already), or carried
        on from an earlier publish (``committed``). With ``may_retry``, a committed stream
        whose holder dies before any of its answer was written is handed back to be published
        again, instead of ending with the error event."""
        if committed is not None:
            resp = committed.resp
        else:
            head_headers = head.headers if head is not None else {}
            resp = SseResponse(headers={**SSE_HEADERS, **call.extra_headers, **head_headers})
            m.ACTIVE_STREAMS.inc()
        now = time.monotonic()
        state = StreamState(received=now, written=now)
        keep_ack = functools.partial(self.holder.ack, held)
        step = Collector(call.fmt, _named(call), state, keep_ack, self.inbox.is_ack, decode)
        # The watchdog runs from ReplyHead on: a stream can stall before its first chunk too.
        dog = asyncio.create_task(watchdog(queue, state, self.ping_interval, self.owner_timeout))
        handed_back: Committed | None = None
        try:
            first = ping_for(call.fmt) if head is None else head.data
            handed_back = await self._write_replies(
                call, resp, first, step, queue, held, committed, may_retry
            )
        except (ConnectionError, RuntimeError):
            # The client went away (aiohttp raises ConnectionResetError, or RuntimeError on a
            # closed transport).
            call.meter.disconnects.inc()
            if call.entry is not None:  # its 200 had left: the entry says it was cut short
                call.entry.error_type = "client_closed"
                call.entry.error_reason = "the client closed the connection mid-stream"
            self._delivered(call)  # an early close is billed as the router records it
            await self._cancel(call)
        except Exception:
            await self._cancel(call)
            if not resp.prepared:
                raise  # the middleware answers with a JSON 500
            log.exception("stream relay failed")
        finally:
            dog.cancel()
            if handed_back is None:
                m.ACTIVE_STREAMS.dec()
            if state.error is not None and call.entry is not None:
                call.entry.failed(state.error)
        return resp if handed_back is None else handed_back

    async def _write_replies(
        self,
        call: Call,
        resp: SseResponse,
        first: bytes,
        step: Collector,
        queue: asyncio.Queue[Msg],
        held: Held,
        committed: Committed | None,
        may_retry: bool,
    ) -> Committed | None:
        """The stream's loop, its only writer: ``first``, then each batch of what its queue
        holds, until its final write; the ``Committed`` stream when it is handed back (the
        outlet then stays open for the next publish)."""
        state = step.state
        outlet: Outlet | None = committed.outlet if committed is not None else None
        handed_back = False
        try:
            if first and outlet is None:
                # The first read of the upstream travels with the head: write it at once. A
                # stream committed early starts with a ping.
                outlet = await self._open(call, resp)
                await outlet.write(first)
                count_events(state, call.fmt, first)
                state.written = time.monotonic()
                if has_token(call.fmt, first):
                    call.first_token = state.written
            while True:
                # Everything that has already arrived goes out in one write: fewer syscalls per
                # event under load, and no waiting for anything that has not arrived.
                data, final, end = step.take(await queue.get(), queue)
                if final and state.lost:
                    # Only pings went out, and NATS is up: a live replica may answer it.
                    again = may_retry and not state.answered and self.nc.is_connected
                    if again and outlet is not None:
                        handed_back = True
                        return Committed(resp, outlet)
                    if state.lost == "owner":  # ("part" is counted where it is found)
                        m.OWNER_LOST_BY("stream_ended").inc()
                if end is not None:
                    if call.entry is not None:
                        call.entry.usage = end.usage
                    # Held until its usage is durable; then written with what preceded it.
                    durable = await self.holder.durable(queue, held, end.usage)
                    data += end.data if durable else _unrecorded_frame(call, state)
                    state.complete = durable
                if outlet is None:
                    # Headers leave with the first bytes of the body, in the same write.
                    outlet = await self._open(call, resp)
                    if not data and not final:
                        await outlet.write(data)  # no bytes yet: the headers go out on their own
                if final:
                    # Nothing but this loop's take() moves ``received``: it is the final reply's.
                    arrived = state.received
                    written = await self._finish(call, outlet, data, state)
                    if written and (end is not None or state.complete):
                        call.meter.final_hold.observe(time.monotonic() - arrived)
                    return None
                if data:
                    if not await outlet.write(data):
                        await self._cut(call, outlet, state)
                        return None
                    state.written = time.monotonic()
                    if not call.first_token and has_token(call.fmt, data):
                        call.first_token = state.written
        finally:
            if outlet is not None and not handed_back:
                outlet.close()

    async def _finish(self, call: Call, outlet: Outlet, data: bytes, state: StreamState) -> bool:
        """The stream's last write, with the end of its body (True); a cut if it does not fit."""
        if not outlet.fits(len(data)):
            await self._cut(call, outlet, state)
            return False
        await outlet.end(data)
        if not call.first_token and has_token(call.fmt, data):
            call.first_token = time.monotonic()
        if state.complete:
            self._delivered(call)
        elif state.lost:
            # The process relaying it is gone, not necessarily the router behind it (a dead
            # translator): stop the upstream call, not charged.
            await self._cancel(call, "gateway")
        return True

    async def _open(self, call: Call, resp: SseResponse) -> Outlet:
        """Prepare the stream's response (its headers leave with the first write)."""
        writer = await resp.prepare(call.request)
        return Outlet(self.outlets, resp, writer, call.request, self.stream_buffer_bytes)

    async def _cut(self, call: Call, outlet: Outlet, state: StreamState) -> None:
        """The client let more than the cap wait at the edge: end its stream with an error
        event behind what it has not read, and stop the request. It is billed as a client that
        left early, for what was produced (docs/billing.md): its cancel says ``client``, and the
        edge confirms its delivery as it does for a client that disconnected."""
        m.SLOW_READERS_CUT.inc()
        kib = self.stream_buffer_bytes // 1024
        message = (
            f"the stream was ended because it was read too slowly: more than {kib} KiB of it "
            "waited to be sent; read a stream as it arrives (what was produced is billed)"
        )
        frame = stream_error_frame(
            call.fmt, _named(call), 408, "invalid_request_error", message, state.events
        )
        if call.entry is not None:
            call.entry.failed(ReplyError(status=408, type="invalid_request_error", message=message))
        await outlet.cut(frame)
        self._delivered(call)
        await self._cancel(call)

    def _delivered(self, call: Call) -> None:
        if self.deliveries is not None and call.envelope.api != "count_tokens":
            self.deliveries.add(call.envelope.uid)

    async def _cancel(self, call: Call, reason: Literal["client", "gateway"] = "client") -> None:
        try:
            env = call.envelope
            cancel = envelopes.encode(
                envelopes.CancelRequest(request_id=call.rid, uid=env.uid, reason=reason)
            )
            await self.nc.publish(self.subjects.cancel, cancel)
        except Exception:
            log.warning("could not broadcast the cancellation")

    def _reply_error(self, call: Call, err: ReplyError) -> web.Response:
        if call.entry is not None:
            call.entry.failed(err)
        return reply_response(call.fmt, call.rid, err, call.extra_headers)

    def _error(self, call: Call, status: int, type: str, message: str) -> web.Response:
        return self._reply_error(call, ReplyError(status=status, type=type, message=message))


def _unrecorded_frame(call: Call, state: StreamState) -> bytes:
    return reply_frame(call.fmt, _named(call), UNRECORDED, state.events)


def _named(call: Call) -> str:
    """The id a stream's error event names: a Responses stream's response is ``resp_`` and the
    request's uid, as its ``response.created`` said (ids are unique per request, the request id
    a client may reuse); the other APIs name the request id."""
    return call.envelope.uid if call.fmt == "responses" else call.rid
