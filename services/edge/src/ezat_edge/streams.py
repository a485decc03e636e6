"""The client side of one SSE stream: its response, its pings and watchdog, and its buffer cap.

The relay's loop (stream_relay.py) is a stream's only writer; this module owns what it writes
through.

* ``SseResponse``: the status line and headers leave with the first body bytes.
* ``Watchdog``: queues a ``Tick`` when the stream's ``Exchange`` (ezat_common/exchange.py) has
  something due: a ping after ``ping_interval`` without a write, the end after ``owner_timeout``
  without a reply (docs/reliability.md, "A holder dies"). The loop ticks the exchange when it
  takes the ``Tick``, behind the replies queued before it.
* ``Collector``: turns what the request's queue holds into the bytes of the next write (each
  reply's part in it: core/stream.py).
* ``Outlet``: writes without waiting for the client, within ``[edge] stream_buffer_bytes``
  (docs/reliability.md, "A client that reads slowly"). aiohttp's ``write`` waits (drains) while
  the transport has paused writing, so a client that read slowly used to stop the relay's loop
  while its replies piled up, unbounded, in the request's queue. Now the loop never waits on a
  client: replies leave the queue as they come, and what the edge holds for a stream is its
  transport's write buffer. Once the transport has paused writing (its buffer above the 64 KiB
  high-water mark: the client is behind), that buffer is compared with the cap before each
  write; a client that keeps up costs one attribute read per write, no syscall, no timer. A
  write that would take it past the cap is not made and the stream is cut (``Outlet.cut``).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, cast

from aiohttp import web
from aiohttp.abc import AbstractStreamWriter
from aiohttp.http_writer import StreamWriter
from ezat_common import envelopes
from ezat_common.envelopes import (
    OWNER_LOST,
    PART_LOST,
    Heartbeat,
    ReplyChunk,
    ReplyEnd,
    ReplyError,
)
from ezat_common.exchange import (
    FORWARD,
    IGNORE,
    KINDS,
    LOST_OWNER,
    LOST_PART,
    PING,
    TICK,
    Exchange,
    Kind,
    Tick,
)
from nats.aio.msg import Msg

from . import metrics as m

# StreamState, count_events, has_token and ping_for are re-exported: the stream loop
# (stream_relay.py) imports them from here.
from .core.stream import (
    RESPONSES_EVENT,
    Added,
    add_lost,
    add_reply,
    next_write,
)
from .core.stream import StreamState as StreamState
from .core.stream import count_events as count_events
from .core.stream import has_token as has_token
from .core.stream import ping_for as ping_for
from .responses import Format, reply_frame

log = logging.getLogger("ezat.edge.relay")

_BODY, _CHUNK = Kind.BODY, Kind.CHUNK
_NUMBERED = (ReplyChunk, ReplyEnd)  # the stream messages a holder numbers
SSE_HEADERS = {"content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache"}
# Seconds a cut stream's connection stays open for its client to take what the edge still holds
# (and the error event behind it); then it is reset and that memory freed.
CUT_FLUSH_GRACE = 5.0


class SseResponse(web.StreamResponse):
    """A stream whose status line and headers leave in the same ``send`` as its first body bytes.

    aiohttp writes a ``StreamResponse``'s headers on their own at ``prepare()`` (its ``Response``
    already holds them back); on loopback every ``send`` also runs the receiver's TCP stack, and
    the edge writes at most two more per stream. ``prepare()`` is always followed at once by a
    write here, so nothing waits on the held headers.
    """

    _send_headers_immediately = False
    sent = 0  # body bytes handed to the transport (Outlet): ezat_edge_response_body_bytes


class Watchdog:
    """Queue a ``Tick`` whenever the stream's exchange has something due (a ping
    ``ping_interval`` after the last write, its end when its holder went silent for
    ``owner_timeout``: heartbeats count), then wait until the loop has taken it (``ticked``).
    It neither ticks the exchange nor writes: the relay's loop does both, in the order of its
    queue (a final reply queued before the tick is read first), and is the only writer, so
    nothing races ``write_eof``.

    A timer of the event loop, not a task: a stream that ends before anything is due (most do)
    costs one timer armed and cancelled, where a task cost a step when it started and another
    when it was cancelled, both on the loop between the stream's first replies."""

    __slots__ = ("_ex", "_queue", "_queued", "_stopped", "_timer")

    def __init__(self, queue: asyncio.Queue[Msg | Tick], ex: Exchange) -> None:
        self._queue = queue
        self._ex = ex
        self._timer: asyncio.TimerHandle | None = None
        self._queued = False  # a Tick is in the queue, not taken yet
        self._stopped = False
        self._arm()

    def ticked(self) -> None:
        """The loop took the ``Tick`` and ticked the exchange: watch for what is due next."""
        if self._queued and not self._stopped:
            self._queued = False
            self._arm()

    def stop(self) -> None:
        self._stopped = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _arm(self) -> None:
        wake = self._ex.wake_at()
        if wake == math.inf:
            return  # the exchange ended (its final reply came, or a part was lost)
        delay = max(wake - time.monotonic(), 0.0)
        self._timer = asyncio.get_running_loop().call_later(delay, self._fire)

    def _fire(self) -> None:
        self._timer = None
        wake = self._ex.wake_at()
        if wake == math.inf:
            return
        if wake > time.monotonic():
            self._arm()  # a reply meanwhile moved the wake-up
            return
        self._queued = True
        self._queue.put_nowait(TICK)


@dataclass(slots=True)
class Collector:
    """Turns what a stream's queue holds into the bytes of its next write (the loop's step)."""

    fmt: Format
    rid: str
    state: StreamState
    ex: Exchange
    keep_ack: Callable[[Msg], None]  # an outbox acknowledgement, for the request's settlement
    is_ack: Callable[[Msg], bool]
    decode: Callable[[Msg], envelopes.Reply]
    # Called when a ``Tick`` was taken and the exchange ticked: the watchdog waits for it.
    ticked: Callable[[], None]
    # What ``take`` is collecting (for ``error_frame``).
    _parts: list[bytes] = field(default_factory=list)

    def take(
        self, msg: Msg | Tick, queue: asyncio.Queue[Msg | Tick]
    ) -> tuple[bytes, bool, ReplyEnd | None]:
        """Bytes of this message and of every one already queued behind it; True when final; and
        the final ``ReplyEnd`` when it must wait for its usage to be durable (not in the bytes).
        What each reply adds is core/stream.py's; whether it counts, the exchange's."""
        parts: list[bytes] = []
        self._parts = parts
        ping = False
        while True:
            if isinstance(msg, Tick):
                decision = self.ex.tick(time.monotonic())
                self.ticked()
                if decision is LOST_OWNER:
                    return self._lost(parts, OWNER_LOST), True, None
                ping = ping or decision is PING
            elif self.is_ack(msg):
                self.keep_ack(msg)  # overtook the ReplyEnd it acknowledges
            else:
                reply = self.decode(msg)
                added: Added | Literal["part_lost"]
                if type(reply) is ReplyChunk:  # the hot path: one exchange step, one append
                    added = self._chunk(reply, parts)
                else:
                    added = self._add(reply, parts)
                if added != "more":
                    match added:
                        case "held":
                            return self._out(b"".join(parts)), True, cast(ReplyEnd, reply)
                        case "final":
                            return self._out(b"".join(parts)), True, None
                        case "part_lost":
                            m.OWNER_LOST_BY("part_lost").inc()
                            return self._lost(parts, PART_LOST), True, None
                        case "ignored":
                            log.warning("ignored %s inside a stream", type(reply).__name__)
            if queue.empty():
                if parts and not self.ex.answered:
                    self.ex.answering()
                return self._out(next_write(parts, ping, self.fmt)), False, None
            msg = queue.get_nowait()

    def _chunk(self, chunk: ReplyChunk, parts: list[bytes]) -> Literal["more", "part_lost"]:
        decision = self.ex.reply(_CHUNK, chunk.seq, time.monotonic())
        if decision is FORWARD:
            parts.append(chunk.data)
            return "more"
        # IGNORE: the exchange has ended (nothing after its end counts).
        return "part_lost" if decision is LOST_PART else "more"

    def _add(self, reply: envelopes.Reply, parts: list[bytes]) -> Added | Literal["part_lost"]:
        """Feed ``reply`` to the exchange; what it adds to ``parts`` if it counts."""
        ex = self.ex
        now = time.monotonic()
        kind = KINDS.get(type(reply))
        if kind is None or kind is _BODY:  # a heartbeat, or no reply of a stream
            if type(reply) is Heartbeat:
                ex.heartbeat(reply.stream, now)
                return "more"
            ex.heard(now)
            return "ignored"
        seq = reply.seq if isinstance(reply, _NUMBERED) else 0
        decision = ex.reply(kind, seq, now)
        if decision is LOST_PART:
            return "part_lost"
        if decision is IGNORE:
            return "more"  # the exchange has ended: nothing after its end counts
        return add_reply(self.state, parts, reply, self.error_frame)

    def _lost(self, parts: list[bytes], err: ReplyError) -> bytes:
        if parts:
            self.ex.answering()
        add_lost(parts, self.error_frame, err)
        return self._out(b"".join(parts))

    def _out(self, data: bytes) -> bytes:
        count_events(self.state, self.fmt, data)
        return data

    def error_frame(self, err: ReplyError) -> bytes:
        """``err`` as its stream's error event: after the events written and those collected
        for this write (a Responses stream's failure carries the next sequence number)."""
        self.state.error = err
        sent = self.state.events
        if self.fmt == "responses":
            sent += sum(p.count(RESPONSES_EVENT) for p in self._parts)
        return reply_frame(self.fmt, self.rid, err, sent)


class Outlet:
    """Writes one prepared stream to its client without waiting for the client to read."""

    __slots__ = ("cap", "is_cut", "outlets", "protocol", "resp", "transport", "writer")

    def __init__(
        self,
        outlets: Outlets,
        resp: SseResponse,
        writer: AbstractStreamWriter | None,
        request: web.Request,
        cap: int,
    ) -> None:
        if writer is None:  # what prepare() returned: None only for a response already ended
            raise RuntimeError("the stream's response has ended")
        self.resp = resp
        self.writer = cast(StreamWriter, writer)  # aiohttp's HTTP/1 writer
        self.protocol = self.writer.protocol
        self.transport = request.transport
        self.cap = cap
        self.is_cut = False
        self.outlets = outlets
        outlets.live.add(self)

    def close(self) -> None:
        """The relay is done with the stream; a cut one stays counted until its reset."""
        if not self.is_cut:
            self.outlets.live.discard(self)

    def held(self) -> int:
        """Bytes written to the client's transport that the kernel has not taken yet."""
        transport = self.transport
        return 0 if transport is None else transport.get_write_buffer_size()

    def fits(self, size: int) -> bool:
        """Whether ``size`` more bytes may be written: always while the client keeps up (the
        transport has not paused writing: it holds less than its 64 KiB high-water mark, so a
        burst that arrived at once goes out whole), else within the cap."""
        return not self.protocol.writing_paused or self.held() + size <= self.cap

    async def write(self, data: bytes) -> bool:
        """Hand ``data`` to the transport; False, and nothing written, past the cap."""
        if self.protocol.writing_paused and self.held() + len(data) > self.cap:
            return False
        await self.writer.write(data, drain=False)
        self.resp.sent += len(data)
        return True

    async def end(self, data: bytes) -> None:
        """The stream's last write, with the end of its chunked body."""
        await self.resp.write_eof(data)
        self.resp.sent += len(data)

    async def cut(self, frame: bytes) -> None:
        """End the stream behind what the transport still holds: ``frame`` (the API's error
        event), the end of the chunked body, then the connection is closed. A client that reads
        on within ``CUT_FLUSH_GRACE`` gets it all; otherwise the connection is reset then."""
        await self.writer.write(frame, drain=False)
        self.resp.sent += len(frame)
        # The last chunk; aiohttp's own write_eof after the handler then writes and waits for
        # nothing.
        self.writer.set_eof()
        self.resp.force_close()
        self.is_cut = True
        asyncio.get_running_loop().call_later(CUT_FLUSH_GRACE, self._reset)

    def _reset(self) -> None:
        self.outlets.live.discard(self)
        transport = self.protocol.transport  # None once the connection is closed
        if transport is not None:
            transport.abort()


class Outlets:
    """The outlets of open streams, and of cut ones until their reset: for the gauges, read at
    scrape time (nothing per write)."""

    def __init__(self) -> None:
        self.live: set[Outlet] = set()

    def held(self) -> int:
        return sum(o.held() for o in self.live)

    def largest(self) -> int:
        return max((o.held() for o in self.live), default=0)
