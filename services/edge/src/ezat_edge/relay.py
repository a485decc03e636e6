"""One client request over NATS: publish it to the translator, then turn the replies into HTTP.

Replies arrive on this process's inbox (one wildcard subscription, a queue per request). The
sequence is ``ReplyHead`` -> ``ReplyChunk``* -> a final ``ReplyEnd``/``ReplyError`` for streams, or
a single ``ReplyBody``/``ReplyError``. Chunks are written as they arrive: nothing is buffered.
A final reply carrying its usage record is released only once that record is durable
(``ezat_common.settling``, docs/billing.md).
A client that goes away cancels the handler; we broadcast a ``CancelRequest`` (carrying the
request's ``uid``, its gateway-internal identity) so the router stops the upstream call. The same
broadcast follows a first-reply timeout: the client saw a 504, so the request must not run on.

Streams have one writer, the loop of stream_relay.py, which never waits for its client to read;
what it writes through (the buffer cap, pings, the watchdog) is streams.py's. A client that lets
more than ``[edge] stream_buffer_bytes`` wait at the edge has its stream cut, billed as a client
that left early (docs/reliability.md, docs/billing.md).

Liveness (docs/reliability.md): whoever holds the request (translator, router) sends a
``Heartbeat`` while it has nothing else to send, so silence for ``OWNER_TIMEOUT`` means it died.
Before any of the answer reached the client the request is then published once more, under a
new uid, to a live replica (the first publish is cancelled as failed: a record it left is never
charged); after, the stream ends with an error event. A stream request whose first byte takes
longer than ``ping_interval`` is committed (200 and SSE headers) on its holder's heartbeat, so
pings keep the client's connection alive while the router still tries deployments; its failure
is then an in-stream error. Those rules are the request's ``Exchange``'s
(ezat_common/exchange.py); this module and stream_relay.py carry out its decisions.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time

from aiohttp import web
from ezat_common import envelopes, tracing
from ezat_common.envelopes import (
    OWNER_LOST,
    UNRECORDED,
    Heartbeat,
    ReplyBody,
    ReplyError,
    ReplyHead,
)
from ezat_common.exchange import (
    AGAIN,
    COMMIT,
    HOLD_FINAL,
    Commit,
    Exchange,
    Fail,
    Kind,
    Lost,
    PublishAgain,
    Tick,
)
from ezat_common.settling import Held
from nats.aio.msg import Msg

from . import metrics as m
from .call import Call as Call
from .call import Committed, Publish
from .decode import decode, nobody_took
from .hop import Hop
from .ids import new_uid
from .responses import JSON
from .stream_relay import StreamRelay

log = logging.getLogger("ezat.edge.relay")

# What waiting for a publish's first reply ends with: the reply, the stream committed on its
# holder's heartbeat, its holder lost, or its time up.
First = envelopes.Reply | Commit | Lost | Fail


class Relay(Hop):
    @functools.cached_property
    def streams(self) -> StreamRelay:
        return StreamRelay(self)

    async def run(self, call: Call, body: bytes) -> web.StreamResponse:
        ex = Exchange(
            call.started, self.first_reply_timeout, self.ping_interval, self.owner_timeout
        )
        committed: Committed | None = None
        while True:  # the exchange publishes again at most PUBLISHES - 1 times
            resp = await self._attempt(call, body, ex, committed)
            if isinstance(resp, web.StreamResponse):
                return resp
            committed = resp  # None, or a stream that had sent its client nothing but pings
            m.OWNER_LOST_BY("retried").inc()
            # A router may still run the first publish (its translator died): stop it, recorded
            # failed. The next publish is a request of its own, under a uid of its own, so that
            # neither its cancels nor its record are mistaken for the first one's.
            await self.cancel(call, "gateway")
            first, call.envelope.uid = call.envelope.uid, new_uid()
            if call.republished is not None:
                await call.republished(first, call.envelope.uid)

    async def _attempt(
        self, call: Call, body: bytes, ex: Exchange, committed: Committed | None
    ) -> web.StreamResponse | Committed | None:
        """One publish of the request and its answer. None when its holder died before any
        reply, a ``Committed`` stream when it died after the stream was committed but before
        any of the answer was sent (pings only), and the exchange publishes it again. A
        committed stream's next publish goes straight to the stream loop, whose replies are
        all in-stream (its status line has left)."""
        queue: asyncio.Queue[Msg | Tick] = asyncio.Queue()
        token, subject = self.inbox.attach(queue)
        p = Publish(call, ex, queue, Held(token), subject, committed)
        try:
            await self._publish(p, body)
            if committed is not None:
                return await self.streams.relay(p, None)
            first = await self._first(p)
            if nobody_took(first, call.envelope):
                first = await self._once_taken(p, first)
            match first:
                case Fail():  # the first reply's timeout
                    # The client is told it failed: stop the request so it is neither run nor
                    # billed.
                    await self.cancel(call)
                    return self.error(
                        call, 504, "timeout_error", "the model took too long to answer"
                    )
                case Lost():
                    if ex.lost(self.nc.is_connected) is AGAIN:
                        return None
                    m.OWNER_LOST_BY("failed").inc()
                    return self.reply_error(call, OWNER_LOST)
                case Commit():
                    m.STREAMS_COMMITTED_EARLY.inc()
                    return await self.streams.relay(p, None)
            return await self._answer(p, first)
        except asyncio.CancelledError:
            # Counted by the handler, which is cancelled wherever the client left it.
            self.delivered(call)  # the client left: what the router records is billed
            ex.client_gone()
            await self.cancel(call)
            raise
        finally:
            self.holder.close(queue, p.held)

    async def _publish(self, p: Publish, body: bytes) -> None:
        """Publish the request (its replies to the publish's subject)."""
        env = p.call.envelope
        env.reply_to = p.subject
        if not p.ex.published_times or env.body_ref is not None:
            # A claim is taken (read and deleted) by its reader: a new one for each publish.
            env.body, env.body_ref = await self.claim(self.claims.pack(body, "translator"))
        p.data = envelopes.encode(env)
        await self._send(p)
        p.ex.published(time.monotonic())

    async def _send(self, p: Publish) -> None:
        headers = tracing.headers(p.call.traceparent)
        await self.nc.publish(self.subjects.translate, p.data, reply=p.subject, headers=headers)

    async def _first(self, p: Publish) -> First:
        """The first reply, within the first-reply timeout and while its holder is heard from;
        ``COMMIT`` when a stream waited ``ping_interval`` (from the request's start) for it. An
        outbox acknowledgement that overtook the final reply it belongs to goes to the
        publish's settlement."""
        ex, queue = p.ex, p.queue
        loop = asyncio.get_running_loop()
        until = ex.wake_at()
        while True:
            try:
                async with asyncio.timeout_at(until):
                    msg = await queue.get()
            except TimeoutError:
                decision = ex.tick(loop.time())
                if isinstance(decision, Lost | Fail):
                    return decision
                until = ex.wake_at()
                continue
            now = loop.time()
            if isinstance(msg, Tick):
                continue  # none before a stream's watchdog runs
            if self.inbox.is_ack(msg):
                self.holder.ack(p.held, msg)
                ex.heard(now)
            else:
                reply = decode(msg)
                if type(reply) is not Heartbeat:
                    return reply
                if ex.heartbeat(reply.stream, now) is COMMIT:
                    return COMMIT
            until = ex.wake_at()

    async def _once_taken(self, p: Publish, first: First) -> First:
        """No translator, or no router behind it, subscribed when the request was published
        (a rolling restart's gap): the same publish again while the exchange says so, then the
        client is told."""
        loop = asyncio.get_running_loop()
        while True:
            again = p.ex.no_responders(loop.time())
            if not isinstance(again, PublishAgain):
                m.NO_RESPONDER.inc()
                return first
            await asyncio.sleep(again.at - loop.time())
            await self._send(p)
            p.ex.published(loop.time(), again=True)
            first = await self._first(p)
            if not nobody_took(first, p.call.envelope):
                return first

    async def _answer(self, p: Publish, first: envelopes.Reply) -> web.StreamResponse:
        """The client's answer from the request's ``first`` reply."""
        call = p.call
        match first:
            case ReplyHead():
                p.ex.reply(Kind.HEAD, 0, time.monotonic())
                answer = await self.streams.relay(p, first)
                assert not isinstance(answer, Committed)  # handed back only when committed
                return answer
            case ReplyBody():
                arrived = time.monotonic()
                decision = p.ex.reply(Kind.BODY, 0, arrived, held=bool(first.usage))
                if call.entry is not None:
                    call.entry.usage = first.usage
                if decision is HOLD_FINAL and not await self.holder.durable(
                    p.queue, p.held, first.usage
                ):
                    return self.reply_error(call, UNRECORDED)
                data = await self.claim(self.claims.unpack(first.data, first.data_ref))
                headers = {**call.extra_headers, **first.headers}
                # Written next (answers.py), or dropped unread after the grace: delivered.
                self.delivered(call)
                now = time.monotonic()
                call.meter.final_hold.observe(now - arrived)
                if 200 <= first.status < 300:
                    call.first_token = now
                return web.Response(
                    status=first.status, body=data, content_type=JSON, headers=headers
                )
            case ReplyError():
                p.ex.reply(Kind.ERROR, 0, time.monotonic())
                return self.reply_error(call, first)
            case _:
                log.error("unexpected first reply %s", type(first).__name__)
                return self.error(call, 500, "api_error", "internal error; retry")
