"""Request bodies under the size limit, refused early (413) without reading the whole body, and
within a deadline (408): ``body_timeout`` seconds plus one second per ``min_rate`` bytes.

A body that arrived with its head (most do) is read without arming anything; only a body still
on its way gets a deadline (one ``asyncio.timeout``), so a client that declares a length and
sends it slowly, or never, does not hold the handler and its connection for ever.
"""

from __future__ import annotations

import asyncio

from aiohttp import web
from ezat_common.errors import GatewayError

from . import metrics as m


def too_large(limit: int) -> GatewayError:
    mb = limit // (1024 * 1024)
    return GatewayError(
        413,
        f"request body: is larger than {mb} MB; send a smaller request",
        type="request_too_large",
    )


def too_slow(seconds: float) -> GatewayError:
    m.BODY_TIMEOUTS.inc()
    return GatewayError(
        408,
        f"request body: not received within {seconds:.0f} s; send it faster or make it smaller",
        code="request_timeout",
    )


async def read_limited(
    request: web.Request, limit: int, timeout: float = 30.0, min_rate: int = 128 * 1024
) -> bytes:
    length = request.content_length
    if length is not None and length > limit:
        raise too_large(limit)
    content = request.content
    if length is not None:
        if not length:
            return b""
        if content.is_eof():
            return await content.readexactly(length)  # all here: no deadline needed
        seconds = timeout + length / min_rate
        try:
            async with asyncio.timeout(seconds):
                return await content.readexactly(length)
        except TimeoutError:
            raise too_slow(seconds) from None
    chunks: list[bytes] = []
    total = 0
    loop = asyncio.get_running_loop()
    start = loop.time()
    try:
        async with asyncio.timeout_at(start + timeout) as deadline:
            async for chunk in content.iter_any():
                total += len(chunk)
                if total > limit:
                    raise too_large(limit)
                chunks.append(chunk)
                # Chunked: the deadline grows with what has arrived, at the minimum rate.
                deadline.reschedule(start + timeout + total / min_rate)
    except TimeoutError:
        raise too_slow(loop.time() - start) from None
    return b"".join(chunks)
