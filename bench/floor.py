"""The architecture's floor: the gateway's hops with nothing done at any of them.

Three processes that do only the I/O the design prescribes (SPEC §9) and no work: an aiohttp
edge that publishes the client's body over NATS and writes the replies back as they come; a
translator that forwards it; a router that POSTs it to the simulator with aiohttp's pooled client
and publishes what each read returns, as it arrives. No authentication, limits, validation,
translation, routing decisions, metrics, logs or billing. The OpenAI path's extra hops (replies
through the translator) are ``/openai/v1/messages``; the bytes still pass through unconverted.

What it is for: ``run.py --floor`` drives it beside the gateway in the same run, so the table
shows how much of the gateway's added latency the hops themselves cost on this machine (same
libraries, uvloop, the same NATS server). A target the floor misses cannot be met by this
architecture here, whatever the gateway's code does.

    python bench/floor.py edge --listen 127.0.0.1:PORT       # NATS_URL from the environment
    python bench/floor.py translator
    python bench/floor.py router --upstream http://127.0.0.1:SIM
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import sys
from typing import Any

import aiohttp
from aiohttp import web
from ezat_common import bus
from ezat_common.runtime import run_service
from nats.aio.msg import Msg

TRANSLATE = "floor.translate"
TRANSLATE_RELAYED = "floor.translate.relayed"  # the OpenAI path: replies come back this way
ROUTE = "floor.route"
# Reply kinds, one byte ahead of the data: the head (first bytes of a stream), a chunk, the
# stream's end, a whole body; then the upstream status for a body.
HEAD, CHUNK, END, BODY = b"H", b"C", b"E", b"B"
SSE_HEADERS = {"content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache"}


class _Stream(web.StreamResponse):
    _send_headers_immediately = False  # as the edge: headers leave with the first bytes


class Inbox:
    """One wildcard subscription per process, a queue per request (as ``ezat_common.bus``)."""

    def __init__(self, nc: Any, name: str) -> None:
        self.nc = nc
        self.prefix = f"_INBOX.floor.{name}.{os.getpid()}"
        self.queues: dict[str, asyncio.Queue[Msg]] = {}
        self.seq = itertools.count(1)

    async def start(self) -> None:
        await self.nc.subscribe(self.prefix + ".*", cb=self._on_msg)

    async def _on_msg(self, msg: Msg) -> None:
        queue = self.queues.get(msg.subject.rsplit(".", 1)[-1])
        if queue is not None:
            queue.put_nowait(msg)

    def open(self) -> tuple[str, str, asyncio.Queue[Msg]]:
        token = str(next(self.seq))
        queue: asyncio.Queue[Msg] = asyncio.Queue()
        self.queues[token] = queue
        return token, f"{self.prefix}.{token}", queue


async def edge(stop: asyncio.Event, listen: str) -> None:
    nc = await bus.connect("floor-edge")
    inbox = Inbox(nc, "edge")
    await inbox.start()

    async def handle(request: web.Request) -> web.StreamResponse:
        subject = TRANSLATE_RELAYED if request.path.startswith("/openai/") else TRANSLATE
        body = await request.read()
        token, reply, queue = inbox.open()
        try:
            await nc.publish(subject, body, reply=reply)
            first = (await queue.get()).data
            if first[:1] == BODY:
                return web.Response(status=int(first[1:4]), body=first[4:], content_type=None)
            resp = _Stream(headers=SSE_HEADERS)
            await resp.prepare(request)
            data = first
            while True:
                if len(data) > 1:
                    await resp.write(data[1:])
                if data[:1] == END:
                    break
                data = (await queue.get()).data
            await resp.write_eof()
            return resp
        finally:
            del inbox.queues[token]

    app = web.Application()
    app.router.add_post("/v1/messages", handle)
    app.router.add_post("/openai/v1/messages", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    host, port = listen.rsplit(":", 1)
    await web.TCPSite(runner, host, int(port)).start()
    await stop.wait()
    await runner.cleanup()
    await nc.close()


async def translator(stop: asyncio.Event) -> None:
    nc = await bus.connect("floor-translator")
    inbox = Inbox(nc, "translator")
    await inbox.start()

    async def forward(msg: Msg) -> None:
        await nc.publish(ROUTE, msg.data, reply=msg.reply)

    async def relayed(msg: Msg) -> None:
        # The OpenAI path: the replies come back here and are passed on to the edge.
        token, reply, queue = inbox.open()
        try:
            await nc.publish(ROUTE, msg.data, reply=reply)
            while True:
                data = (await queue.get()).data
                await nc.publish(msg.reply, data)
                if data[:1] in (END, BODY):
                    return
        finally:
            del inbox.queues[token]

    async def relayed_task(msg: Msg) -> None:
        asyncio.get_running_loop().create_task(relayed(msg))

    await nc.subscribe(TRANSLATE, queue="floor", cb=forward)
    await nc.subscribe(TRANSLATE_RELAYED, queue="floor", cb=relayed_task)
    await stop.wait()
    await nc.close()


async def router(stop: asyncio.Event, upstream: str) -> None:
    nc = await bus.connect("floor-router")
    connector = aiohttp.TCPConnector(limit=1024, keepalive_timeout=30)
    session = aiohttp.ClientSession(connector=connector)
    url = upstream.rstrip("/") + "/v1/messages"
    headers = {"content-type": "application/json", "anthropic-version": "2023-06-01"}
    headers["x-api-key"] = "sim-key"
    publish = nc.publish

    async def call(msg: Msg) -> None:
        reply = msg.reply
        async with session.post(url, data=msg.data, headers=headers) as resp:
            if resp.content_type != "text/event-stream":
                body = await resp.read()
                await publish(reply, BODY + b"%03d" % resp.status + body)
                return
            kind = HEAD
            read = resp.content.readany
            while chunk := await read():
                await publish(reply, kind + chunk)
                kind = CHUNK
        await publish(reply, END)

    async def on_route(msg: Msg) -> None:
        asyncio.get_running_loop().create_task(call(msg))

    await nc.subscribe(ROUTE, queue="floor", cb=on_route)
    await stop.wait()
    await session.close()
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
