"""The edge's stream response sends its headers in the same write as the first body bytes.

Read from a raw socket, as a client sees it: after ``prepare()`` nothing arrives until the first
write, and then the status line, the headers and the first event arrive together.
"""

from __future__ import annotations

import asyncio

from aiohttp import web
from aiohttp.test_utils import TestServer
from ezat_edge.streams import SseResponse

EVENT = b'event: message_start\ndata: {"type": "message_start"}\n\n'


async def _serve(handler):  # type: ignore[no-untyped-def]
    app = web.Application()
    app.router.add_get("/", handler)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    return server, server.port


async def _get(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    await writer.drain()
    return reader, writer


async def test_headers_wait_for_the_first_event_and_leave_with_it() -> None:
    prepared = asyncio.Event()
    release = asyncio.Event()

    async def handler(request: web.Request) -> web.StreamResponse:
        resp = SseResponse(headers={"content-type": "text/event-stream"})
        await resp.prepare(request)
        prepared.set()
        await release.wait()
        await resp.write(EVENT)
        await resp.write_eof()
        return resp

    server, port = await _serve(handler)
    try:
        reader, writer = await _get(port)
        await prepared.wait()
        try:
            early = await asyncio.wait_for(reader.read(65536), 0.3)
        except TimeoutError:
            early = b""
        assert early == b"", "headers left before any event"
        release.set()
        first = await asyncio.wait_for(reader.read(65536), 5)
        assert first.startswith(b"HTTP/1.1 200 OK\r\n")
        assert b"content-type: text/event-stream" in first.lower()
        assert EVENT in first, "the first event did not arrive with the headers"
        writer.close()
    finally:
        release.set()
        await server.close()


async def test_an_empty_write_still_sends_the_headers() -> None:
    release = asyncio.Event()

    async def handler(request: web.Request) -> web.StreamResponse:
        resp = SseResponse(headers={"content-type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(b"")
        await release.wait()
        await resp.write_eof(EVENT)
        return resp

    server, port = await _serve(handler)
    try:
        reader, writer = await _get(port)
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert head.startswith(b"HTTP/1.1 200 OK\r\n")
        release.set()
        rest = await asyncio.wait_for(reader.read(65536), 5)
        assert EVENT in rest
        writer.close()
    finally:
        release.set()
        await server.close()
