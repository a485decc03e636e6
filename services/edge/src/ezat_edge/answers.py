"""A non-streamed answer written within ``[edge] unread_answer_grace`` (docs/reliability.md, "A
client that does not read its answer").

aiohttp writes a returned ``Response`` after the handler: the whole body goes to the transport,
then it waits (drains) until the client has taken all but the transport's low-water mark. A client
that never reads kept that wait, its connection and the body in the transport's buffer for as long
as it stayed connected: ten such clients of 40 MB answers pinned 400 MB for as long as they liked.
Here the answer is written before aiohttp's turn (by the model call's handler, while the request
still counts in flight; by ``answers_mw`` for every other response), and a client that has not
taken it within the grace, plus one second per ``min_rate`` bytes of it (``[edge] body_min_rate``,
the rate a request body must keep too: a slow link still gets a large answer), has it dropped: the
transport is aborted (its buffer freed at once, the client sees a reset). A model call stays
billed as the router recorded it: the answer had been produced whole, and the edge confirmed its
delivery as for a client that leaves early (docs/billing.md, "Billed only when delivered").

Once an answer is dropped the edge asks the C library to hand its free heap pages back
(``malloc_trim``, at most once a second): the bytes are freed at once, but glibc would keep them.

Cost per answer above ``SMALL``: one timer armed and cancelled around the write
(``asyncio.timeout``); the write itself is what aiohttp would have done after the handler. An
answer of at most ``SMALL`` bytes is left to aiohttp: it fits under the transport's high-water
mark, so its write never waits for the client, and what an unread one pins is bounded by it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import logging
from collections.abc import Awaitable, Callable

from aiohttp import web
from aiohttp.typedefs import Middleware

from . import metrics as m

log = logging.getLogger("ezat.edge.answers")

# The transport's high-water mark (asyncio's and uvloop's default): a write of at most this
# much into an empty buffer never pauses for the client.
SMALL = 64 * 1024


async def write_within(
    request: web.Request, resp: web.Response, grace: float, min_rate: int
) -> web.Response:
    """``resp`` written to its client, or dropped with its connection when the client has not
    taken it within ``grace`` seconds plus one per ``min_rate`` bytes (or has gone). aiohttp's own
    write after the handler then has nothing left to do (or meets the closed transport, which it
    takes for a client gone)."""
    if resp.content_length is not None and resp.content_length <= SMALL:
        return resp  # aiohttp writes it after the handler, without waiting (see SMALL)
    transport = request.transport
    seconds = grace + (resp.content_length or 0) / min_rate
    try:
        await resp.prepare(request)
        async with asyncio.timeout(seconds):
            await resp.write_eof()
    except TimeoutError:
        m.UNREAD_ANSWERS_DROPPED.inc()
        log.info("answer dropped: its client had not read it within %.1f s", seconds)
        if transport is not None:
            transport.abort()
        _TRIM.soon()
    except ConnectionError:
        pass  # the client left while it was written: nothing more to do
    return resp


class _Trim:
    """Hands the heap's free pages back to the system (glibc's ``malloc_trim``) a moment after a
    large answer was dropped: freed, its bytes stay in the C heap, where glibc keeps them for
    reuse (a CI run kept 73 of 132 MB that ten dropped answers had pinned). At most once a
    second; nothing where the C library has no ``malloc_trim``."""

    def __init__(self) -> None:
        self._trim: Callable[[int], int] | None = None
        with contextlib.suppress(OSError, AttributeError):
            self._trim = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
        self._armed = False

    def soon(self) -> None:
        if self._trim is None or self._armed:
            return
        self._armed = True
        asyncio.get_running_loop().call_later(TRIM_AFTER, self._run)

    def _run(self) -> None:
        self._armed = False
        if self._trim is not None:
            self._trim(0)


TRIM_AFTER = 1.0  # seconds: the aborted transports' buffers are freed by then
_TRIM = _Trim()

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def answers_mw(grace: float, min_rate: int) -> Middleware:
    """Every other non-streamed response (stored responses, usage pages, errors) written within
    the same deadline; the model calls write theirs in their handler, still counted in flight."""

    @web.middleware
    async def written_within(request: web.Request, handler: Handler) -> web.StreamResponse:
        resp = await handler(request)
        if isinstance(resp, web.Response) and not resp.prepared:
            await write_within(request, resp, grace, min_rate)
        return resp

    return written_within
