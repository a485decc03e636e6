"""Request bodies under the size limit, refused early (413) without reading the whole body, and
within a deadline (408): ``body_timeout`` seconds plus one second per ``min_rate`` bytes.

A body that arrived with its head (most do) is read without arming anything; only a body still
on its way gets a deadline (one ``asyncio.timeout``), so a client that declares a length and
sends it slowly, or never, does not hold the handler and its connection for ever.

Each body is also counted against the bytes of bodies one edge holds, in all and per key
(``core/body_bytes.py``): its declared length before any of it is read, a chunked body as it
grows; past either limit, 529 (OpenAI API: 503) with ``retry-after``. ``BodyHold`` is one
request's share, given back once in the handler's ``finally`` (success, error, disconnect,
timeout alike).
"""

from __future__ import annotations

import asyncio

from aiohttp import web
from ezat_common.errors import GatewayError

from . import metrics as m
from .core.body_bytes import BodyBytes, Over

# Seconds a client refused for bodies in flight is asked to wait: bodies take seconds to arrive.
BODIES_RETRY_AFTER = 2


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


def _size(n: int) -> str:
    mib, rest = divmod(n, 1024 * 1024)
    return f"{mib} MiB" if mib and not rest else f"{n} bytes"


def too_many_bodies(over: Over, budget: BodyBytes) -> GatewayError:
    if over == "key":
        message = (
            f"request body: this key's requests in progress already hold {_size(budget.per_key)}"
            " of request bodies at the gateway (its limit of body bytes in flight per key); retry"
            " once some of them have finished, or send fewer large requests at a time"
        )
    else:
        message = (
            f"request body: the gateway holds {_size(budget.per_edge)} of request bodies in"
            " progress (its limit of body bytes in flight); retry shortly"
        )
    return GatewayError(529, message, retry_after=BODIES_RETRY_AFTER)


class BodyHold:
    """One request's reservation of body bytes: taken as its body arrives, given back once."""

    __slots__ = ("_budget", "held", "key")

    def __init__(self, budget: BodyBytes) -> None:
        self._budget = budget
        self.key = ""  # the request's key id, once it is known
        self.held = 0

    def take(self, size: int) -> None:
        """Reserve ``size`` more bytes, or raise the 529 that names the limit they would pass."""
        over = self._budget.reserve(self.key, size)
        if over is not None:
            m.BODY_BYTES_REFUSED_BY[over].inc()
            raise too_many_bodies(over, self._budget)
        self.held += size

    def release(self) -> None:
        self._budget.release(self.key, self.held)
        self.held = 0


async def read_limited(
    request: web.Request,
    limit: int,
    hold: BodyHold,
    timeout: float = 30.0,
    min_rate: int = 128 * 1024,
) -> bytes:
    length = request.content_length
    if length is not None and length > limit:
        raise too_large(limit)
    content = request.content
    if length is not None:
        if not length:
            return b""
        hold.take(length)  # before reading: a declared body is held from its first byte
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
                hold.take(len(chunk))
                chunks.append(chunk)
                # Chunked: the deadline grows with what has arrived, at the minimum rate.
                deadline.reschedule(start + timeout + total / min_rate)
    except TimeoutError:
        raise too_slow(loop.time() - start) from None
    return b"".join(chunks)
