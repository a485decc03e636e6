"""Relaying one publish's stream to its client (relay.py starts it): the stream's loop, its only
writer, turns what its queue holds into writes; its ``Exchange`` says what counts and whether a
stream that lost its holder before any of its answer is handed back to be published again
(docs/reliability.md, "A holder dies"). What it writes through is streams.py's."""

from __future__ import annotations

import functools
import logging
import time

from aiohttp import web
from ezat_common.envelopes import UNRECORDED, ReplyError, ReplyHead
from ezat_common.exchange import AGAIN, Fail, Phase

from . import metrics as m
from .call import Call, Committed, Publish
from .decode import decode
from .hop import Hop
from .responses import reply_frame, stream_error_frame
from .streams import (
    SSE_HEADERS,
    Collector,
    Outlet,
    SseResponse,
    StreamState,
    Watchdog,
    count_events,
    has_token,
    ping_for,
)

log = logging.getLogger("ezat.edge.relay")


class StreamRelay:
    def __init__(self, hop: Hop) -> None:
        self.hop = hop

    async def relay(self, p: Publish, head: ReplyHead | None) -> web.StreamResponse | Committed:
        """Relay a stream from its ``ReplyHead``; or, with None, one committed before its head
        (the head's headers are then not sent: the status line has left already), or carried
        on from an earlier publish (``p.committed``). A committed stream whose holder dies
        before any of its answer was written is handed back (``Committed``) when its exchange
        says it is published again, instead of ending with the error event."""
        call, hop = p.call, self.hop
        if p.committed is not None:
            resp = p.committed.resp
        else:
            head_headers = head.headers if head is not None else {}
            resp = SseResponse(headers={**SSE_HEADERS, **call.extra_headers, **head_headers})
            m.ACTIVE_STREAMS.inc()
        state = StreamState()
        keep_ack = functools.partial(hop.holder.ack, p.held)
        # The watchdog runs from ReplyHead on: a stream can stall before its first chunk too.
        dog = Watchdog(p.queue, p.ex)
        step = Collector(
            call.fmt, _named(call), state, p.ex, keep_ack, hop.inbox.is_ack, decode, dog.ticked
        )
        handed_back: Committed | None = None
        try:
            first = ping_for(call.fmt) if head is None else head.data
            handed_back = await self._write_replies(p, resp, first, step)
        except (ConnectionError, RuntimeError):
            # The client went away (aiohttp raises ConnectionResetError, or RuntimeError on a
            # closed transport).
            call.meter.disconnects.inc()
            if call.entry is not None:  # its 200 had left: the entry says it was cut short
                call.entry.error_type = "client_closed"
                call.entry.error_reason = "the client closed the connection mid-stream"
            hop.delivered(call)  # an early close is billed as the router records it
            await hop.cancel(call)
        except Exception:
            await hop.cancel(call)
            if not resp.prepared:
                raise  # the middleware answers with a JSON 500
            log.exception("stream relay failed")
        finally:
            dog.stop()
            if handed_back is None:
                m.ACTIVE_STREAMS.dec()
            if state.error is not None and call.entry is not None:
                call.entry.failed(state.error)
        return resp if handed_back is None else handed_back

    async def _write_replies(
        self, p: Publish, resp: SseResponse, first: bytes, step: Collector
    ) -> Committed | None:
        """The stream's loop, its only writer: ``first``, then each batch of what its queue
        holds, until its final write; the ``Committed`` stream when it is handed back (the
        outlet then stays open for the next publish)."""
        call, ex, state = p.call, p.ex, step.state
        outlet: Outlet | None = p.committed.outlet if p.committed is not None else None
        handed_back = False
        try:
            if first and outlet is None:
                # The first read of the upstream travels with the head: write it at once. A
                # stream committed early starts with a ping.
                outlet = await self._open(call, resp)
                await outlet.write(first)
                count_events(state, call.fmt, first)
                ex.wrote(False, time.monotonic())
                if has_token(call.fmt, first):
                    call.first_token = ex.written
            while True:
                # Everything that has already arrived goes out in one write: fewer syscalls per
                # event under load, and no waiting for anything that has not arrived.
                data, final, end = step.take(await p.queue.get(), p.queue)
                if final and ex.phase is Phase.LOST:
                    # Only pings went out, and NATS is up: a live replica may answer it.
                    decision = ex.lost(self.hop.nc.is_connected)
                    if decision is AGAIN and outlet is not None:
                        handed_back = True
                        return Committed(resp, outlet)
                    if decision == Fail("owner_lost"):  # ("part" is counted where it is found)
                        m.OWNER_LOST_BY("stream_ended").inc()
                if end is not None:
                    if call.entry is not None:
                        call.entry.usage = end.usage
                    # Held until its usage is durable; then written with what preceded it.
                    durable = await self.hop.holder.durable(p.queue, p.held, end.usage)
                    data += end.data if durable else _unrecorded_frame(call, state)
                    state.complete = durable
                if outlet is None:
                    # Headers leave with the first bytes of the body, in the same write.
                    outlet = await self._open(call, resp)
                    if not data and not final:
                        await outlet.write(data)  # no bytes yet: the headers go out on their own
                        ex.wrote(False, time.monotonic())
                if final:
                    # Nothing but this loop's take() moves ``received``: it is the final reply's.
                    arrived = ex.received
                    written = await self._finish(p, outlet, data, state)
                    if written and (end is not None or state.complete):
                        call.meter.final_hold.observe(time.monotonic() - arrived)
                    return None
                if data:
                    if not await outlet.write(data):
                        await self._cut(call, outlet, state)
                        return None
                    ex.wrote(False, time.monotonic())
                    if not call.first_token and has_token(call.fmt, data):
                        call.first_token = ex.written
        finally:
            if outlet is not None and not handed_back:
                outlet.close()

    async def _finish(self, p: Publish, outlet: Outlet, data: bytes, state: StreamState) -> bool:
        """The stream's last write, with the end of its body (True); a cut if it does not fit."""
        call = p.call
        if not outlet.fits(len(data)):
            await self._cut(call, outlet, state)
            return False
        await outlet.end(data)
        if not call.first_token and has_token(call.fmt, data):
            call.first_token = time.monotonic()
        if state.complete:
            self.hop.delivered(call)
        elif p.ex.lost_what:
            # The process relaying it is gone, not necessarily the router behind it (a dead
            # translator): stop the upstream call, not charged.
            await self.hop.cancel(call, "gateway")
        return True

    async def _open(self, call: Call, resp: SseResponse) -> Outlet:
        """Prepare the stream's response (its headers leave with the first write)."""
        writer = await resp.prepare(call.request)
        hop = self.hop
        return Outlet(hop.outlets, resp, writer, call.request, hop.stream_buffer_bytes)

    async def _cut(self, call: Call, outlet: Outlet, state: StreamState) -> None:
        """The client let more than the cap wait at the edge: end its stream with an error
        event behind what it has not read, and stop the request. It is billed as a client that
        left early, for what was produced (docs/billing.md): its cancel says ``client``, and the
        edge confirms its delivery as it does for a client that disconnected."""
        m.SLOW_READERS_CUT.inc()
        kib = self.hop.stream_buffer_bytes // 1024
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
        self.hop.delivered(call)
        await self.hop.cancel(call)


def _unrecorded_frame(call: Call, state: StreamState) -> bytes:
    return reply_frame(call.fmt, _named(call), UNRECORDED, state.events)


def _named(call: Call) -> str:
    """The id a stream's error event names: a Responses stream's response is ``resp_`` and the
    request's uid, as its ``response.created`` said (ids are unique per request, the request id
    a client may reuse); the other APIs name the request id."""
    return call.envelope.uid if call.fmt == "responses" else call.rid
