"""The timed writer of a streamed reply: a thin async loop around ``sse.stream_steps``.

Each event is written as soon as it is due (one ``write`` per event, no buffering), so a client
sees the stream's real timing: ``first_token_ms`` before the first content delta, ``token_ms``
before each later one, and an ``event: ping`` every 5 s of a longer pause. With both delays at
zero nothing sleeps at all.

Faults strike between events: ``fail_after`` sends Anthropic's ``overloaded_error`` event and ends
the stream; ``drop_after`` closes the connection with no message_stop and no end of the chunked
body; ``stall_after`` stops writing (no ping either) and keeps the connection open until the
client goes away. Each fires after that many content tokens, or before message_delta when the
reply is shorter.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from aiohttp import web

from . import sse
from .anthropic_wire import error_event
from .engine import Plan
from .requestlog import Outcome, RequestRecord

PING_EVERY_MS = 5000.0


class SseResponse(web.StreamResponse):
    """Headers leave with ``message_start``, in one ``send``, as from a server that writes the
    response head and first event together; ``message_start`` is never delayed, so neither are
    the headers (aiohttp would otherwise send them alone at ``prepare()``)."""

    _send_headers_immediately = False


@dataclass(frozen=True, slots=True)
class Timing:
    """How one reply is paced and broken: the instance's settings with overrides applied."""

    first_token_ms: float = 0.0
    token_ms: float = 0.0
    fail_after: int | None = None
    drop_after: int | None = None
    stall_after: int | None = None
    stall_before_start: bool = False  # 200 and the headers, then nothing

    def total_ms(self, deltas: int) -> float:
        """The time a whole reply of ``deltas`` deltas takes (what a non-streamed call waits)."""
        if deltas <= 0:
            return 0.0
        return self.first_token_ms + self.token_ms * (deltas - 1)


async def pause(resp: web.StreamResponse, ms: float) -> None:
    while ms > PING_EVERY_MS:
        await asyncio.sleep(PING_EVERY_MS / 1000)
        await resp.write(sse.PING)
        ms -= PING_EVERY_MS
    await asyncio.sleep(ms / 1000)


async def hold() -> None:
    """Send nothing, keep the connection, until the client goes away (aiohttp then cancels the
    handler: ``handler_cancellation``)."""
    while True:
        await asyncio.sleep(3600)


def drop_connection(request: web.BaseRequest) -> None:
    """Close the socket now: what was written is flushed, the HTTP body is left unfinished."""
    if request.transport is not None:
        request.transport.close()


async def send_stream(
    request: web.BaseRequest,
    resp: web.StreamResponse,
    plan: Plan,
    timing: Timing,
    record: RequestRecord,
) -> Outcome:
    """Write every event of ``plan`` to the prepared ``resp``; return how the stream ended."""
    fail_after, drop_after, stall_after = timing.fail_after, timing.drop_after, timing.stall_after
    sent = 0  # content tokens written
    started = False
    for kind, data, tokens in sse.stream_steps(plan):
        if kind == sse.TOKEN or kind == sse.FINAL:
            final = kind == sse.FINAL
            if fail_after is not None and (final or sent >= fail_after):
                await resp.write(error_event("overloaded_error", "Overloaded", record.id))
                return "error"
            if drop_after is not None and (final or sent >= drop_after):
                drop_connection(request)
                return "dropped"
            if stall_after is not None and (final or sent >= stall_after):
                await hold()
        if kind == sse.TOKEN or kind == sse.PIECE:
            delay = timing.token_ms if started else timing.first_token_ms
            started = True
            if delay > 0:
                await pause(resp, delay)
            sent += kind == sse.TOKEN
        await resp.write(data)
        record.tokens_sent += tokens
    return "complete"
