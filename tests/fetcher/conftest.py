"""A local image server for the fetcher's adapter and handler tests (127.0.0.1, random port).

Loopback is not public, so tests that want a download to succeed pass
``allow=parse_networks(["127.0.0.0/8"])``, as ``[fetcher] allow_networks`` would.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest_asyncio
from aiohttp import web

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 56
BIG_PNG = b"\x89PNG\r\n\x1a\n" + b"\x01" * (2 * 1024 * 1024)  # above NATS max_payload


async def png(request: web.Request) -> web.Response:
    # A wrong Content-Type on purpose: the bytes decide the type.
    return web.Response(body=PNG, content_type="text/plain")


async def big_png(request: web.Request) -> web.Response:
    return web.Response(body=BIG_PNG, content_type="image/png")


async def streamed(request: web.Request) -> web.StreamResponse:
    """Chunked, no Content-Length: the limit must be enforced while streaming."""
    resp = web.StreamResponse()
    resp.enable_chunked_encoding()
    await resp.prepare(request)
    await resp.write(PNG)
    for _ in range(int(request.query.get("chunks", "10"))):
        await resp.write(b"\x02" * 1024)
    await resp.write_eof()
    return resp


async def status(request: web.Request) -> web.Response:
    """``?after=TAG:N``: answers only once N stalled downloads of TAG arrived (5 s at most), so a
    test can order a failure after its siblings started however busy the machine is."""
    after = request.query.get("after")
    if after:
        tag, count = after.rsplit(":", 1)
        deadline = asyncio.get_running_loop().time() + 5.0
        while STALL_HITS[tag] < int(count) and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)
    return web.Response(status=int(request.match_info["code"]), text="nope")


async def chain(request: web.Request) -> web.Response:
    """/chain/N redirects N more times, then serves the PNG."""
    left = int(request.match_info["n"])
    if left == 0:
        return web.Response(body=PNG)
    raise web.HTTPFound(f"/chain/{left - 1}")  # relative Location, resolved by the fetcher


async def to(request: web.Request) -> web.Response:
    raise web.HTTPFound(request.query["url"])


async def html(request: web.Request) -> web.Response:
    return web.Response(text="<html>not an image</html>", content_type="image/png")


async def slow(request: web.Request) -> web.Response:
    await asyncio.sleep(10)
    return web.Response(body=PNG)


# /stall?tag=T: hits and handlers still running, by tag (each test picks its own tag).
STALL_HITS: Counter[str] = Counter()
STALL_ACTIVE: Counter[str] = Counter()


async def stall(request: web.Request) -> web.Response:
    """Counts the hit, then sends nothing for a minute (or until the client hangs up)."""
    tag = request.query.get("tag", "")
    STALL_HITS[tag] += 1
    STALL_ACTIVE[tag] += 1
    try:
        await asyncio.sleep(60)
        return web.Response(body=PNG)
    finally:
        STALL_ACTIVE[tag] -= 1


async def host_png(request: web.Request) -> web.Response:
    """The PNG only when the Host header is the name the client asked for."""
    expected = request.query["host"]
    if request.host != expected:
        return web.Response(status=421, text=f"host was {request.host}")
    return web.Response(body=PNG)


@dataclass(frozen=True)
class ImageServer:
    port: int

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def stall_url(self, tag: str, n: int = 0) -> str:
        return self.url(f"/stall?tag={tag}&n={n}")

    @staticmethod
    def hits(tag: str) -> int:
        return STALL_HITS[tag]

    @staticmethod
    def active(tag: str) -> int:
        """Stalled downloads of ``tag`` whose client has not hung up yet."""
        return STALL_ACTIVE[tag]


@pytest_asyncio.fixture(scope="package", loop_scope="session")
async def image_server() -> AsyncIterator[ImageServer]:
    app = web.Application()
    app.router.add_get("/png", png)
    app.router.add_get("/big.png", big_png)
    app.router.add_get("/streamed", streamed)
    app.router.add_get("/status/{code}", status)
    app.router.add_get("/chain/{n}", chain)
    app.router.add_get("/to", to)
    app.router.add_get("/html", html)
    app.router.add_get("/slow", slow)
    app.router.add_get("/host.png", host_png)
    app.router.add_get("/stall", stall)
    runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield ImageServer(port=port)
    finally:
        await runner.cleanup()
