"""Request bodies under the size limit, refused early (413) without reading the whole body."""

from __future__ import annotations

from aiohttp import web
from ezat_common.errors import GatewayError


def too_large(limit: int) -> GatewayError:
    mb = limit // (1024 * 1024)
    return GatewayError(
        413,
        f"request body: is larger than {mb} MB; send a smaller request",
        type="request_too_large",
    )


async def read_limited(request: web.Request, limit: int) -> bytes:
    length = request.content_length
    if length is not None and length > limit:
        raise too_large(limit)
    if length is not None:
        return await request.content.readexactly(length) if length else b""
    chunks: list[bytes] = []
    total = 0
    async for chunk in request.content.iter_any():
        total += len(chunk)
        if total > limit:
            raise too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)
