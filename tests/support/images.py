"""An image server on loopback for the tests that send image URLs through the fetcher."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from aiohttp import web

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


async def _png(request: web.Request) -> web.Response:
    # Not image/png: the fetcher must sniff the bytes, not trust the server's content type.
    return web.Response(body=PNG, content_type="application/octet-stream")


@asynccontextmanager
async def serving(
    handler: Callable[[web.Request], Awaitable[web.Response]] = _png,
) -> AsyncIterator[str]:
    """The base URL of a server answering ``GET /photo.png`` with ``handler`` (a 1x1 PNG)."""
    app = web.Application()
    app.router.add_get("/photo.png", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()
