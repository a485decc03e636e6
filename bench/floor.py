"""The architecture's floor: the gateway's hops with nothing, or only the mandatory work, done.

Three processes that do the I/O the design prescribes (docs/architecture.md) the way the gateway
does it: an aiohttp edge publishes the client's body over NATS and writes the replies back as they
come (all that has already arrived in one write, the last bytes with the end of the body, headers
with the first bytes); a translator forwards it; a router POSTs it to the simulator with aiohttp's
pooled client and publishes each read as it arrives, the final one as soon as ``message_stop`` is in
it. No authentication, limits, validation, routing decision, metrics or logs, and no translation
but on the converting paths (the last below). Paths:

- ``/v1/messages``: the hops alone (``floor`` in the bench);
- ``/openai/v1/messages``: replies back through the translator, as on the OpenAI path
  (``floor-openai``; the bytes still pass through unconverted);
- ``/billed/v1/messages``: the hops plus the work no gateway of this design may skip
  (``floor-billed``): the router parses the stream with its own pure core (``SseParser`` and
  ``StreamStep``: usage, the model rewritten, message_stop held) and publishes the usage record
  to the outbox with the edge as the PubAck's subject; the edge writes the final bytes only once
  JetStream acknowledged the record (docs/billing.md), and the stack's billing drains it into
  PostgreSQL.
- ``/openai-billed/v1/messages``: both, the OpenAI path's hops and that mandatory work
  (``floor-openai-billed``): the floor an OpenAI client's request is judged against, since the
  gateway bills every API's answers before their final event.

- ``/openai-converted/v1/chat/completions`` and ``/openai-converted/v1/responses``: that, plus
  the request and every reply translated by the gateway's own API entries
  (``floor-openai-converted``, ``floor-responses-converted``; floor_convert.py).

``run.py`` drives these beside the gateway in the same run, so the table shows how much of the
gateway's added latency and CPU the architecture itself costs on this machine.

    python bench/floor.py edge --listen 127.0.0.1:PORT       # NATS_URL from the environment
    python bench/floor.py translator
    python bench/floor.py router --upstream http://127.0.0.1:SIM
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import sys
import time
from typing import Any

import aiohttp
import floor_convert
import nats.errors
from aiohttp import web
from ezat_common import bus, envelopes
from ezat_common.envelopes import UsageRecord
from ezat_common.outbox import Outbox, acknowledged
from ezat_common.pricing import FREE, cost_micros, usd
from ezat_common.runtime import run_service
from ezat_common.settlement import ACK_TIMEOUT
from ezat_common.sse import SseError, SseParser
from ezat_common.subjects import from_env
from ezat_edge.streams import SSE_HEADERS, SseResponse
from ezat_router.core.accounting import UsageAccumulator
from ezat_router.core.payload import (
    PayloadError,
    message_delta_frame,
    read_response,
    with_response_model,
)
from ezat_router.core.stream import StreamStep
from nats.aio.msg import Msg

TRANSLATE, ROUTE = "floor.translate", "floor.route"
TRANSLATE_RELAYED = "floor.translate.relayed"  # the OpenAI path: replies come back this way
TRANSLATE_BILLED, ROUTE_BILLED = "floor.translate.billed", "floor.route.billed"
TRANSLATE_RELAYED_BILLED = "floor.translate.relayed.billed"  # both: the OpenAI path, billed
# The OpenAI path, billed, its request and replies translated (floor_convert.py), by API.
CONVERTED = {
    "floor.translate.converted.chat": "chat",
    "floor.translate.converted.responses": "responses",
}
BILLED = (TRANSLATE_BILLED, TRANSLATE_RELAYED_BILLED, *CONVERTED)
# Reply kinds, one byte ahead of the data: a stream's head (its first bytes), a chunk, its end
# (with its last bytes), a whole body (then its 3-digit status).
HEAD, CHUNK, END, BODY = b"H", b"C", b"E", b"B"
ABORT = b"X"  # a stream cut after its head: the edge ends it without an end marker
_FINAL = (END, ABORT)
MESSAGE_STOP = b"event: message_stop"
MODEL = "claude-sonnet-5-5"
REPLY_TIMEOUT = 60.0  # the edge's and translator's wait for a reply: a failure never hangs


async def edge(stop: asyncio.Event, listen: str) -> None:
    nc = await bus.connect("floor-edge")
    names = from_env()
    inbox = bus.Inbox(nc, names, f"floor-edge-{os.getpid()}")  # the edge's own inbox
    await inbox.start()
    outbox_stream = names.outbox_stream
    subjects = {"/v1/messages": TRANSLATE, "/openai/v1/messages": TRANSLATE_RELAYED}
    subjects["/billed/v1/messages"] = TRANSLATE_BILLED
    subjects["/openai-billed/v1/messages"] = TRANSLATE_RELAYED_BILLED
    subjects["/openai-converted/v1/chat/completions"] = "floor.translate.converted.chat"
    subjects["/openai-converted/v1/responses"] = "floor.translate.converted.responses"

    async def handle(request: web.Request) -> web.StreamResponse:
        subject = subjects[request.path]
        body = await request.read()
        token, reply, queue = inbox.open()
        billed = subject in BILLED
        if billed:  # where the outbox acknowledges the record: this request's queue
            body = inbox.ack_subject(token).encode() + b"\n" + body
        relay = Relay(request, queue, inbox, outbox_stream, billed)
        try:
            async with asyncio.timeout(REPLY_TIMEOUT):
                await nc.publish(subject, body, reply=reply)
                return await relay.answer()
        except TimeoutError:
            if relay.resp is None:
                return web.Response(status=504, text="floor: no reply")
            await relay.resp.write_eof()  # begun: cut it, no end marker
            return relay.resp
        finally:
            inbox.close(token)

    app = web.Application()
    for path in subjects:
        app.router.add_post(path, handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    host, port = listen.rsplit(":", 1)
    await web.TCPSite(runner, host, int(port)).start()
    await stop.wait()
    await runner.cleanup()
    await nc.close()


class Relay:
    """One request's replies to HTTP. A billed request's final bytes wait for the PubAck."""

    def __init__(
        self,
        request: web.Request,
        queue: asyncio.Queue[Msg],
        inbox: bus.Inbox,
        stream: str,
        billed: bool,
    ) -> None:
        self.request, self.queue, self.inbox, self.stream = request, queue, inbox, stream
        # The outbox's verdict on the record: None until its PubAck arrived (in any order).
        self.stored: bool | None = None if billed else True
        self.resp: web.StreamResponse | None = None

    def _note(self, msg: Msg) -> bool:
        """True if ``msg`` was the outbox's acknowledgement (noted), not a reply."""
        if not self.inbox.is_ack(msg):
            return False
        self.stored = acknowledged(msg, self.stream)
        return True

    async def _reply(self) -> Msg:
        while self._note(msg := await self.queue.get()):
            pass
        return msg

    async def _durable(self) -> bool:
        """The PubAck's verdict, waited for as the edge does: at most ``ACK_TIMEOUT``."""
        try:
            async with asyncio.timeout(ACK_TIMEOUT):
                while self.stored is None:
                    self._note(await self.queue.get())
        except TimeoutError:
            return False
        return self.stored

    async def answer(self) -> web.StreamResponse:
        """The client's response, from the replies (and, when billed, the outbox's verdict)."""
        msg = await self._reply()
        if bus.is_no_responders(msg):
            return web.Response(status=503, text="floor: no translator or router subscribed")
        data = msg.data
        kind = data[:1]
        if kind == BODY:
            status = int(data[1:4])
            # Only a 200 is billed (and acknowledged); an error status is relayed at once.
            if status == 200 and not await self._durable():
                return web.Response(status=500, text="floor: usage not stored")
            return web.Response(status=status, body=data[4:], content_type=None)
        resp = self.resp = SseResponse(headers=SSE_HEADERS)
        await resp.prepare(self.request)
        parts = []
        if kind == HEAD:
            await resp.write(data[1:])  # the head, at once, with the headers
        else:
            parts.append(data[1:])
        while kind not in _FINAL:
            data = (await self._reply()).data
            kind = data[:1]
            parts.append(data[1:])
            while kind not in _FINAL and not self.queue.empty():
                msg = self.queue.get_nowait()
                if not self._note(msg):
                    kind = msg.data[:1]
                    parts.append(msg.data[1:])
            if kind not in _FINAL:
                await resp.write(b"".join(parts))
                parts.clear()
        if kind == END and await self._durable():
            await resp.write_eof(b"".join(parts))
        else:  # cut, or not stored: no end marker, which the load generator counts as an error
            await resp.write_eof()
        return resp


async def translator(stop: asyncio.Event) -> None:
    nc = await bus.connect("floor-translator")
    prefix = f"_INBOX.floor.translator.{os.getpid()}"
    seq = itertools.count(1)
    edges: dict[str, str] = {}  # OpenAI path: our reply token -> the edge's reply subject
    converting = floor_convert.Converting(MODEL)

    async def forward(msg: Msg) -> None:
        await nc.publish(ROUTE, msg.data, reply=msg.reply)

    async def forward_billed(msg: Msg) -> None:
        await nc.publish(ROUTE_BILLED, msg.data, reply=msg.reply)

    async def relayed(msg: Msg) -> None:
        token = str(next(seq))
        edges[token] = msg.reply
        route = ROUTE_BILLED if msg.subject == TRANSLATE_RELAYED_BILLED else ROUTE
        await nc.publish(route, msg.data, reply=f"{prefix}.{token}")

    async def converted(msg: Msg) -> None:
        # Translated inside the callback, as the translator does a small chat request.
        token = str(next(seq))
        ack, _, body = msg.data.partition(b"\n")
        try:
            data = await converting.request(CONVERTED[msg.subject], token, body)
        except Exception as exc:  # the client hears it at once, as the translator's 4xx/500
            await nc.publish(msg.reply, floor_convert.refusal(exc))
            return
        edges[token] = msg.reply
        await nc.publish(ROUTE_BILLED, ack + b"\n" + data, reply=f"{prefix}.{token}")

    async def on_reply(msg: Msg) -> None:
        # Passed on inside the callback, as the translator does with a chat stream's replies.
        # An entry stays only if its router died mid-request: the floor lives for one bench run.
        token = msg.subject.rsplit(".", 1)[-1]
        data = msg.data
        if bus.is_no_responders(msg):
            data = BODY + b"503floor: no router"
            converting.convs.pop(token, None)
        elif token in converting.convs:
            data = converting.reply(token, data)
        # The router always ends a request with one of these, failures included.
        to = edges.pop(token, None) if data[:1] in (END, BODY, ABORT) else edges.get(token)
        if to is not None:
            await nc.publish(to, data)

    await nc.subscribe(prefix + ".*", cb=on_reply)
    await nc.subscribe(TRANSLATE, queue="floor", cb=forward)
    await nc.subscribe(TRANSLATE_RELAYED, queue="floor", cb=relayed)
    await nc.subscribe(TRANSLATE_BILLED, queue="floor", cb=forward_billed)
    await nc.subscribe(TRANSLATE_RELAYED_BILLED, queue="floor", cb=relayed)
    for subject in CONVERTED:
        await nc.subscribe(subject, queue="floor", cb=converted)
    await stop.wait()
    await nc.close()


class Upstream:
    """The router's side: one pooled session; each request's replies published as they come."""

    def __init__(self, nc: Any, base_url: str) -> None:
        self.nc = nc
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=1024, keepalive_timeout=30)
        )
        self.url = base_url.rstrip("/") + "/v1/messages"
        self.headers = {"content-type": "application/json", "anthropic-version": "2023-06-01"}
        self.headers["x-api-key"] = "sim-key"
        self.outbox = Outbox(nc, from_env())

    async def call(self, msg: Msg) -> None:
        billed = msg.subject == ROUTE_BILLED
        body, ack_to = msg.data, ""
        if billed:
            head, _, body = body.partition(b"\n")
            ack_to = head.decode()
        call = _Call(msg.reply)
        try:
            async with self.session.post(self.url, data=body, headers=self.headers) as resp:
                if resp.content_type != "text/event-stream":
                    data = await resp.read()
                    if billed and resp.status == 200:
                        data = await self._bill_body(data, ack_to, call.started)
                    call.final = True
                    await self.nc.publish(call.reply, BODY + b"%03d" % resp.status + data)
                    return
                if billed:
                    await self._billed_stream(resp, call, ack_to)
                else:
                    await self._stream(resp, call)
                while await resp.content.readany():  # to the end: the connection is reused
                    pass
        except (aiohttp.ClientError, OSError, TimeoutError, SseError, PayloadError, Unbilled):
            pass
        except nats.errors.Error:
            return  # NATS is gone: nobody would get the final reply either
        finally:
            if not call.final:  # failed, cancelled, or ended without message_stop
                failed = ABORT if call.head else BODY + b"502floor: upstream failed"
                with contextlib.suppress(nats.errors.Error):
                    await self.nc.publish(call.reply, failed)

    async def _stream(self, resp: aiohttp.ClientResponse, call: _Call) -> None:
        """Each read as it arrives, the last one (message_stop) as the end."""
        read = resp.content.readany
        while chunk := await read():
            if MESSAGE_STOP in chunk:
                call.final = True
                await self.nc.publish(call.reply, END + chunk)
                return
            await self.nc.publish(call.reply, (CHUNK if call.head else HEAD) + chunk)
            call.head = True

    async def _billed_stream(self, resp: aiohttp.ClientResponse, call: _Call, ack_to: str) -> None:
        parser, usage = SseParser(), UsageAccumulator()
        step = StreamStep(MODEL, usage)
        first = 0.0
        read = resp.content.readany
        while chunk := await read():
            result = step.step(parser.feed(chunk))
            if result.first_delta and not first:
                first = time.time()
            if result.stop is not None:
                record = usage.record(_base(True, call.started, first), "complete")
                await self._publish_record(record, ack_to)
                call.final = True
                # The gateway's end: the held message_delta with the answer's cost, the stop.
                tail = result.stop
                if result.delta is not None:
                    cost = usd(cost_micros(record, FREE))
                    tail = message_delta_frame(result.delta, cost) + tail
                await self.nc.publish(call.reply, END + result.data + tail)
                return
            if result.finished:  # an upstream error event or not a Messages stream
                return
            if result.data:
                await self.nc.publish(call.reply, (CHUNK if call.head else HEAD) + result.data)
                call.head = True

    async def _bill_body(self, data: bytes, ack_to: str, started: float) -> bytes:
        document, used, content = read_response(data)
        usage = UsageAccumulator()
        usage.feed_response(used, content, document.get("stop_reason"))
        record = usage.record(_base(False, started, time.time()), "complete")
        out = with_response_model(document, MODEL, usd(cost_micros(record, FREE)))
        await self._publish_record(record, ack_to)
        return out

    async def _publish_record(self, record: UsageRecord, ack_to: str) -> None:
        data = envelopes.encode(record)
        if not await self.outbox.publish(record.uid, data, ack_to, timeout=1.0):
            raise Unbilled  # the gateway would ask billing directly; the floor gives up


class Unbilled(Exception):
    """The usage record could not even be sent to the outbox."""


class _Call:
    __slots__ = ("final", "head", "reply", "started")

    def __init__(self, reply: str) -> None:
        self.reply = reply
        self.started = time.time()
        self.head = False  # a stream's first bytes were published
        self.final = False  # the final reply was published


_ids = itertools.count(1)


def _base(stream: bool, started: float, first: float) -> UsageRecord:
    rid = f"floor-{os.getpid()}-{next(_ids)}"
    return UsageRecord(
        request_id=rid,
        uid=rid,
        key_id="floor-billed",
        model=MODEL,
        api="messages",
        stream=stream,
        status="complete",
        deployment="floor",
        received_at=started,
        upstream_started_at=started,
        first_token_at=first,
        finished_at=time.time(),
    )


async def router(stop: asyncio.Event, upstream: str) -> None:
    nc = await bus.connect("floor-router")
    up = Upstream(nc, upstream)

    calls: set[asyncio.Task[None]] = set()

    async def on_route(msg: Msg) -> None:
        task = asyncio.get_running_loop().create_task(up.call(msg))
        calls.add(task)
        task.add_done_callback(calls.discard)

    await nc.subscribe(ROUTE, queue="floor", cb=on_route)
    await nc.subscribe(ROUTE_BILLED, queue="floor", cb=on_route)
    await stop.wait()
    for task in list(calls):  # each still publishes its final reply: no edge waits on it
        task.cancel()
    await asyncio.gather(*calls, return_exceptions=True)
    await up.session.close()
    await nc.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("role", choices=("edge", "translator", "router"))
    p.add_argument("--listen", default="127.0.0.1:8090", help="edge: host:port")
    p.add_argument("--upstream", default="", help="router: the simulator's base URL")
    args = p.parse_args()
    if args.role == "edge":
        run_service(lambda stop: edge(stop, args.listen))
    elif args.role == "translator":
        run_service(translator)
    elif not args.upstream:
        sys.exit("router: --upstream is required")
    else:
        run_service(lambda stop: router(stop, args.upstream))


if __name__ == "__main__":
    main()
