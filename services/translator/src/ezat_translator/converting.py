"""One router reply of an OpenAI API request as its API's answer to the edge (each request's
``Conversion``, conversions.py): converted and published inline, in arrival order, by the token
table (relayed.py); nothing on that path waits for Redis, PostgreSQL or the object store, except
in a task of its own: a final answer that needs work first (thinking to keep, a response to
store: the task does it, *then* publishes the answer, because the client can only send the turn
that needs it after that), and a body that comes or goes as a claim check.

The final reply keeps the router's ``usage`` (the encoded record the edge holds it for): the
outbox acknowledges it to the edge (``RouteRequest.client_reply_to``), which releases the
converted final event once the record is durable (``ezat_common.settling``).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from ezat_common import bus, envelopes
from ezat_common.envelopes import ReplyBody, ReplyChunk, ReplyEnd, ReplyError, ReplyHead
from ezat_common.tasks import TaskSet

from . import metrics as m
from .conversions import Before, cost_of
from .core.sse_split import pieces
from .openai_state import OpenAIState

log = logging.getLogger("ezat.translator.chat")

INTERNAL = ReplyError(status=500, type="api_error", message="internal error; retry")


class Converter:
    def __init__(self, nc: bus.Client, claims: bus.Claims, tasks: TaskSet) -> None:
        self.nc = nc
        self.claims = claims
        self.tasks = tasks  # the final answers that need work first

    def convert(self, state: OpenAIState, reply: envelopes.Reply) -> list[envelopes.Reply]:
        """The replies to publish now, in order (none: nothing, or a task publishes them
        later). Stream bytes above the inline limit go as several numbered messages
        (core/sse_split.py): one message could exceed NATS's max_payload."""
        match reply:
            case ReplyHead():
                first, *rest = self._split(self._feed(state, reply.data))
                return [ReplyHead(headers=reply.headers, data=first), *self._chunks(state, rest)]
            case ReplyChunk():
                data = self._feed(state, reply.data)
                if len(data) > self.claims.inline_limit:
                    return self._chunks(state, self._split(data))
                if not data:
                    return []
                # The hot path: one converted chunk, one message.
                state.seq_out += 1
                return [ReplyChunk(data=data, seq=state.seq_out)]
            case ReplyEnd():
                data, before = self._end(state, reply.data)
                m.STREAM.done(state.stream_seconds)
                *lead, last = self._split(data)
                out: list[envelopes.Reply] = self._chunks(state, lead)
                # The edge holds the converted end until its usage is durable (``usage``).
                out.append(ReplyEnd(data=last, usage=reply.usage, seq=state.seq_out + 1))
                if before is not None:
                    self._spawn(state, self._then_publish(state, before, out))
                    return []
                return out
            case ReplyBody():
                if reply.data_ref is not None:
                    self._spawn(state, self._unpack_body(state, reply))
                    return []
                data, before = state.conv.body(reply.data, cost_of(reply.headers))
                if before is None and len(data) <= self.claims.inline_limit:
                    body = ReplyBody(
                        status=reply.status, headers=reply.headers, data=data, usage=reply.usage
                    )
                    return [body]
                self._spawn(state, self._publish_body(state, reply, data, before))
                return []
            case ReplyError():
                return [state.conv.error(reply)]
        return []

    def _split(self, data: bytes) -> list[bytes]:
        return pieces(data, self.claims.inline_limit)

    @staticmethod
    def _chunks(state: OpenAIState, parts: list[bytes]) -> list[envelopes.Reply]:
        """``parts`` as the stream's next numbered chunks (an empty part: none)."""
        out: list[envelopes.Reply] = []
        for data in parts:
            if data:
                state.seq_out += 1
                out.append(ReplyChunk(data=data, seq=state.seq_out))
        return out

    async def fail(self, state: OpenAIState) -> None:
        await self.nc.publish(state.edge_reply_to, envelopes.encode(INTERNAL))

    @staticmethod
    def _feed(state: OpenAIState, data: bytes) -> bytes:
        """The API's bytes for these Anthropic frames, timed into the stream's total."""
        started = time.perf_counter()
        try:
            return state.conv.feed(data)
        except Exception:
            m.STREAM.error.inc()
            raise
        finally:
            state.stream_seconds += time.perf_counter() - started

    @staticmethod
    def _end(state: OpenAIState, data: bytes) -> tuple[bytes, Before]:
        """The stream's final bytes, timed into its total, and what must precede them."""
        started = time.perf_counter()
        try:
            return state.conv.end(data)
        except Exception:
            m.STREAM.error.inc()
            raise
        finally:
            state.stream_seconds += time.perf_counter() - started

    async def _unpack_body(self, state: OpenAIState, reply: ReplyBody) -> None:
        anthropic_body = await self.claims.unpack(reply.data, reply.data_ref)
        data, before = state.conv.body(anthropic_body, cost_of(reply.headers))
        await self._publish_body(state, reply, data, before)

    async def _publish_body(
        self, state: OpenAIState, reply: ReplyBody, data: bytes, before: Before
    ) -> None:
        if before is not None:
            await before()  # before the body: the next turn may need it
        inline, ref = await self.claims.pack(data, "edge")
        out = ReplyBody(
            status=reply.status, headers=reply.headers, data=inline, data_ref=ref, usage=reply.usage
        )
        await self.nc.publish(state.edge_reply_to, envelopes.encode(out))

    async def _then_publish(
        self, state: OpenAIState, before: Callable[[], Awaitable[None]], out: list[envelopes.Reply]
    ) -> None:
        await before()  # before the final event: the next turn needs it
        for reply in out:
            await self.nc.publish(state.edge_reply_to, envelopes.encode(reply))

    def _spawn(self, state: OpenAIState, coro: Coroutine[Any, Any, None]) -> None:
        # Spawned while the reply is handled (relayed.py's on_reply): the task's copy of the
        # context already names the request for its log lines.
        self.tasks.spawn_guarded(
            coro, log, "reply conversion failed", on_error=functools.partial(self.fail, state)
        )
