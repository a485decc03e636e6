"""One client request over NATS: publish it to the translator, then turn the replies into HTTP.

Replies arrive on this process's inbox (one wildcard subscription, a queue per request). The
sequence is ``ReplyHead`` -> ``ReplyChunk``* -> a final ``ReplyEnd``/``ReplyError`` for streams, or
a single ``ReplyBody``/``ReplyError``. Chunks are written as they arrive: nothing is buffered.
A final reply carrying its usage record is released only once that record is durable (held.py).
A client that goes away cancels the handler; we broadcast a ``CancelRequest`` (carrying the
request's ``uid``, its gateway-internal identity) so the router stops the upstream call. The same
broadcast follows a first-reply timeout: the client saw a 504, so the request must not run on.

Streams have one writer, this handler's loop. A watchdog task, started when ``ReplyHead`` arrives,
queues a ping when nothing has been written for ``ping_interval`` (pings count as writes), and an
end-of-stream marker when nothing has been *received* for ``idle_timeout``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TypeVar

from aiohttp import web
from ezat_common import bus, envelopes
from ezat_common.envelopes import (
    UNRECORDED,
    ReplyBody,
    ReplyChunk,
    ReplyEnd,
    ReplyError,
    ReplyHead,
)
from ezat_common.errors import GatewayError
from ezat_common.subjects import Subjects
from nats.aio.msg import Msg

from . import metrics as m
from .held import Held, Holder
from .responses import JSON, Format, error_response, stream_error_frame

log = logging.getLogger("ezat.edge.relay")
_T = TypeVar("_T")

ANTHROPIC_PING = b'event: ping\ndata: {"type": "ping"}\n\n'
OPENAI_PING = b": ping\n\n"
_IDLE = object()
_PING = object()
SSE_HEADERS = {"content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache"}


class SseResponse(web.StreamResponse):
    """A stream whose status line and headers leave in the same ``send`` as its first body bytes.

    aiohttp writes a ``StreamResponse``'s headers on their own at ``prepare()`` (its ``Response``
    already holds them back); on loopback every ``send`` also runs the receiver's TCP stack, and
    the edge writes at most two more per stream. ``prepare()`` is always followed at once by a
    write here, so nothing waits on the held headers.
    """

    _send_headers_immediately = False


@dataclass(slots=True)
class Call:
    """What the relay needs to know about one request."""

    request: web.Request
    rid: str
    fmt: Format
    envelope: envelopes.ClientRequest
    extra_headers: dict[str, str]
    started: float


class Relay:
    def __init__(
        self,
        nc: bus.Client,
        subjects: Subjects,
        inbox: bus.Inbox,
        claims: bus.Claims,
        first_reply_timeout: float,
        ping_interval: float,
        idle_timeout: float,
    ) -> None:
        self.nc = nc
        self.subjects = subjects
        self.inbox = inbox
        self.claims = claims
        self.first_reply_timeout = first_reply_timeout
        self.ping_interval = ping_interval
        self.idle_timeout = idle_timeout
        self.holder = Holder(nc, subjects, inbox)

    async def run(self, call: Call, body: bytes) -> web.StreamResponse:
        token, subject, queue = self.inbox.open()
        env = call.envelope
        env.reply_to = subject
        env.ack_to = self.inbox.ack_subject(token)
        held = Held(token)
        try:
            env.body, env.body_ref = await self._claim(self.claims.pack(body))
            await self.nc.publish(self.subjects.translate, envelopes.encode(env), reply=subject)
            try:
                msg = await self._first_reply(queue, held)
            except TimeoutError:
                # The client is told it failed: stop the request so it is neither run nor billed.
                await self._cancel(call)
                return self._error(call, 504, "timeout_error", "the model took too long to answer")
            first = self._decode(msg)
            match first:
                case ReplyHead():
                    return await self._stream(call, first, queue, held)
                case ReplyBody():
                    if first.usage and not await self.holder.durable(queue, held, first.usage):
                        return self._reply_error(call, UNRECORDED)
                    data = await self._claim(self.claims.unpack(first.data, first.data_ref))
                    headers = {**call.extra_headers, **first.headers}
                    return web.Response(
                        status=first.status, body=data, content_type=JSON, headers=headers
                    )
                case ReplyError():
                    return self._reply_error(call, first)
                case _:
                    log.error("unexpected first reply %s", type(first).__name__)
                    return self._error(call, 500, "api_error", "internal error; retry")
        except asyncio.CancelledError:
            m.DISCONNECTS.inc()
            await self._cancel(call)
            raise
        finally:
            self.holder.close(queue, held)

    @staticmethod
    async def _claim(op: Awaitable[_T]) -> _T:
        """An object-store operation (claim check); its failure is a 503 the client may retry."""
        try:
            return await op
        except Exception as exc:
            log.warning("object store unavailable: %s", type(exc).__name__)
            raise GatewayError(
                503, "the gateway could not move the request body; retry shortly", retry_after=2
            ) from None

    async def _first_reply(self, queue: asyncio.Queue[Msg], held: Held) -> Msg:
        """The first reply, within ``first_reply_timeout``; an outbox acknowledgement that
        overtook the final reply it belongs to is kept in ``held``."""
        async with asyncio.timeout(self.first_reply_timeout):
            while True:
                msg = await queue.get()
                if not self.inbox.is_ack(msg):
                    return msg
                held.ack = msg

    def _decode(self, msg: Msg) -> envelopes.Reply:
        if bus.is_no_responders(msg):
            return ReplyError(
                status=529,
                type="overloaded_error",
                message="the gateway has no translator available; retry shortly",
                retry_after=2,
            )
        return envelopes.decode_reply(msg.data)

    async def _stream(
        self, call: Call, head: ReplyHead, queue: asyncio.Queue[Msg], held: Held
    ) -> web.StreamResponse:
        resp = SseResponse(headers={**SSE_HEADERS, **call.extra_headers, **head.headers})
        m.ACTIVE_STREAMS.inc()
        now = time.monotonic()
        state = _StreamState(received=now, written=now)
        # The watchdog runs from ReplyHead on: a stream can stall before its first chunk too.
        watchdog = asyncio.create_task(self._watchdog(call, queue, state))
        try:
            if head.data:
                # The first read of the upstream travels with the head: write it at once.
                await resp.prepare(call.request)
                m.FIRST_BYTE_BY(call.envelope.api).observe(time.monotonic() - call.started)
                await resp.write(head.data)
                state.written = time.monotonic()
            while True:
                msg = await queue.get()
                # Everything that has already arrived goes out in one write: fewer syscalls per
                # event under load, and no waiting for anything that has not arrived.
                data, final, end = self._collect(call, msg, queue, state, held)
                if end is not None:
                    # Held until its usage is durable; then written with what preceded it.
                    durable = await self.holder.durable(queue, held, end.usage)
                    data += end.data if durable else _unrecorded_frame(call)
                if not resp.prepared:
                    # Headers leave with the first bytes of the body, in the same write.
                    await resp.prepare(call.request)
                    m.FIRST_BYTE_BY(call.envelope.api).observe(time.monotonic() - call.started)
                    if not data and not final:
                        await resp.write(data)  # no bytes yet: the headers go out on their own
                if final:
                    await resp.write_eof(data)
                    break
                if data:
                    await resp.write(data)
                    state.written = time.monotonic()
        except (ConnectionError, RuntimeError):
            # The client went away (aiohttp raises ConnectionResetError, or RuntimeError on a
            # closed transport).
            m.DISCONNECTS.inc()
            await self._cancel(call)
        except Exception:
            await self._cancel(call)
            if not resp.prepared:
                raise  # the middleware answers with a JSON 500
            log.exception("stream relay failed")
        finally:
            watchdog.cancel()
            m.ACTIVE_STREAMS.dec()
        return resp

    def _collect(
        self, call: Call, msg: Msg, queue: asyncio.Queue[Msg], state: _StreamState, held: Held
    ) -> tuple[bytes, bool, ReplyEnd | None]:
        """Bytes of this message and of every one already queued behind it; True when final; and
        the final ``ReplyEnd`` when it must wait for its usage to be durable (not in the bytes)."""
        parts: list[bytes] = []
        ping = False
        while True:
            if msg is _IDLE:
                frame = stream_error_frame(
                    call.fmt, call.rid, 504, "timeout_error", "the model stopped responding"
                )
                parts.append(frame)
                return b"".join(parts), True, None
            if msg is _PING:
                ping = True
            elif self.inbox.is_ack(msg):
                held.ack = msg  # overtook the ReplyEnd it acknowledges
            else:
                state.received = time.monotonic()
                reply = self._decode(msg)
                match reply:
                    case ReplyChunk():
                        parts.append(reply.data)
                    case ReplyEnd():
                        if reply.usage:
                            return b"".join(parts), True, reply
                        parts.append(reply.data)
                        return b"".join(parts), True, None
                    case ReplyError():
                        frame = stream_error_frame(
                            call.fmt, call.rid, reply.status, reply.type, reply.message
                        )
                        parts.append(frame)
                        return b"".join(parts), True, None
                    case _:
                        log.warning("ignored %s inside a stream", type(reply).__name__)
            if queue.empty():
                if not parts:
                    # A ping only when nothing else is written now (any write keeps it alive).
                    return (self._ping(call) if ping else b""), False, None
                return parts[0] if len(parts) == 1 else b"".join(parts), False, None
            msg = queue.get_nowait()

    @staticmethod
    def _ping(call: Call) -> bytes:
        return OPENAI_PING if call.fmt == "openai" else ANTHROPIC_PING

    async def _watchdog(self, call: Call, queue: asyncio.Queue[Msg], state: _StreamState) -> None:
        """Queue a ping ``ping_interval`` after the last write, and an end to streams whose
        upstream went silent for ``idle_timeout``. It never writes itself: the handler's loop is
        the only writer, so nothing races ``write_eof``."""
        while True:
            now = time.monotonic()
            wake = min(state.written + self.ping_interval, state.received + self.idle_timeout)
            if wake > now:
                await asyncio.sleep(wake - now)
                now = time.monotonic()
            if now - state.received >= self.idle_timeout:
                queue.put_nowait(_IDLE)  # type: ignore[arg-type]
                return
            if now - state.written >= self.ping_interval:
                # Counted as written now, so a ping still queued behind a slow write is not
                # queued again on every wake-up.
                state.written = now
                queue.put_nowait(_PING)  # type: ignore[arg-type]

    async def _cancel(self, call: Call) -> None:
        try:
            env = call.envelope
            cancel = envelopes.encode(envelopes.CancelRequest(request_id=call.rid, uid=env.uid))
            await self.nc.publish(self.subjects.cancel, cancel)
        except Exception:
            log.warning("could not broadcast the cancellation")

    def _reply_error(self, call: Call, err: ReplyError) -> web.Response:
        return error_response(
            call.fmt,
            call.rid,
            err.status,
            err.type,
            err.message,
            param=err.param,
            code=err.code,
            retry_after=err.retry_after,
            headers={**call.extra_headers, **err.headers},
        )

    def _error(self, call: Call, status: int, type: str, message: str) -> web.Response:
        return error_response(call.fmt, call.rid, status, type, message, headers=call.extra_headers)


def _unrecorded_frame(call: Call) -> bytes:
    return stream_error_frame(
        call.fmt, call.rid, UNRECORDED.status, UNRECORDED.type, UNRECORDED.message
    )


@dataclass(slots=True)
class _StreamState:
    received: float  # last reply received (the idle timeout)
    written: float  # last write to the client, pings included (the ping schedule)
