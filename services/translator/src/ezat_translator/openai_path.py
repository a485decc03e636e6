"""The reply side of both OpenAI APIs (Chat Completions and Responses): convert the router's
Anthropic replies into the API's answers on their way to the edge (each request's
``Conversion``, conversions.py). Their requests are translated and routed by the translator's
one request path (app.py, apis.py), which hands each route to ``open``.

Unlike the Anthropic API, the format changes on the way back, so the router replies to this
process's inbox; one wildcard subscription dispatches by sequence number to the request's state
(no task per request or per event). State is dropped on the final reply, on cancellation (matched
on the request's ``uid``: a client-chosen request id may be shared by other requests), or when no
router is there.

Liveness (docs/reliability.md): while a state lives, the edge hears our heartbeats; the router
beats us in turn. A router silent for ``OWNER_TIMEOUT`` is dead: the request is sent once more to
a live router if nothing of it reached the edge yet, else the edge is told it failed (``watch``).

The final reply keeps the router's ``usage`` (the encoded record the edge holds it for): the
outbox acknowledges it to the edge (``RouteRequest.client_reply_to``), which releases the
converted final event once the record is durable (``ezat_common.settling``).

Replies are converted and published inline, in arrival order; nothing on that path waits for
Redis, PostgreSQL or the object store, except in a task of its own: a final answer that needs
work first (thinking to keep, a response to store: the task does it, *then* publishes the
answer, because the client can only send the turn that needs it after that), and a body that
comes or goes as a claim check.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from ezat_common import bus, envelopes, logs, tracing
from ezat_common.envelopes import (
    OWNER_LOST,
    Heartbeat,
    ReplyBody,
    ReplyChunk,
    ReplyEnd,
    ReplyError,
    ReplyHead,
)
from ezat_common.liveness import OWNER_TIMEOUT, Heartbeats
from ezat_common.subjects import Subjects
from ezat_common.tasks import TaskSet
from ezat_common.undecodable import decoded
from nats.aio.msg import Msg

from . import metrics as m
from .conversions import Before, Conversion, cost_of
from .openai_state import OpenAIState

log = logging.getLogger("ezat.translator.chat")

# After the no-router prefix: the reply subject of a chat route names its state, not the edge.
NO_ROUTER_TAG = "chat."


class OpenAIPath:
    def __init__(
        self,
        nc: bus.Client,
        subjects: Subjects,
        claims: bus.Claims,
        instance: str,
        no_router_prefix: str,
        beats: Heartbeats,
    ) -> None:
        self.nc = nc
        self.beats = beats
        self.subjects = subjects
        self.claims = claims
        self.prefix = subjects.inbox(instance)
        self.no_router_prefix = no_router_prefix
        self.seq = itertools.count(1)
        self.states: dict[str, OpenAIState] = {}
        # uid (gateway-internal request identity) -> token
        self.by_request: dict[str, str] = {}
        self.tasks = TaskSet()

    async def start(self) -> None:
        await self.claims.open()
        await self.nc.subscribe(self.prefix + ".*", cb=self.on_reply)

    # ---- request -> router ----------------------------------------------------------------

    async def open(
        self,
        req: envelopes.ClientRequest,
        route: envelopes.RouteRequest,
        conv: Conversion,
        traceparent: str | None,
    ) -> None:
        """Publish ``route`` (``req``'s) with a reply subject of its own, whose replies go
        through ``conv`` to the edge; the request's state holds the edge's beats from here."""
        token = str(next(self.seq))
        # Registered only once nothing can fail before the publish: no state is left behind.
        state = OpenAIState(req.request_id, req.uid, req.key_id, req.reply_to, conv)
        state.traceparent = traceparent
        self.states[token] = state
        self.by_request[req.uid] = token
        try:
            await self._publish_route(token, state, route)
        except BaseException:
            self._forget(token)
            raise

    async def _publish_route(
        self, token: str, state: OpenAIState, route: envelopes.RouteRequest
    ) -> None:
        route.reply_to = f"{self.prefix}.{token}"
        data = envelopes.encode(route)
        # A claim-checked body is read (and deleted) by the router: it cannot be sent twice.
        state.route = data if route.body_ref is None else None
        state.heard = time.monotonic()
        await self.nc.publish(
            self.subjects.route,
            data,
            reply=f"{self.no_router_prefix}{NO_ROUTER_TAG}{token}",
            headers=tracing.headers(state.traceparent),
        )

    def no_router(self, token: str) -> str | None:
        """No router took the request of ``token``: forget it; the edge inbox to tell, if any."""
        state = self.states.get(token)
        if state is None:
            return None
        self._forget(token)
        return state.edge_reply_to

    # ---- router -> edge -------------------------------------------------------------------

    async def on_reply(self, msg: Msg) -> None:
        token = msg.subject.rsplit(".", 1)[-1]
        state = self.states.get(token)
        if state is None:
            return
        state.heard = time.monotonic()
        rid = logs.request_id.set(state.request_id)
        try:
            reply = decoded(envelopes.decode_reply, "reply", msg)
            if reply is None:
                await self._abandon(token, state)
                return
            if type(reply) is Heartbeat:
                return
            state.route = None  # the router answered: the request is its own now
            out = self._convert(token, state, reply)
            if out is not None:
                await self.nc.publish(state.edge_reply_to, envelopes.encode(out))
        except Exception:
            log.exception("reply conversion failed")
            await self._abandon(token, state)
        finally:
            logs.request_id.reset(rid)

    async def _abandon(self, token: str, state: OpenAIState) -> None:
        self._forget(token)
        await self._fail(state)

    async def _fail(self, state: OpenAIState) -> None:
        err = ReplyError(status=500, type="api_error", message="internal error; retry")
        await self.nc.publish(state.edge_reply_to, envelopes.encode(err))

    @staticmethod
    def _skipped(state: OpenAIState, seq: int) -> bool:
        """Counts a numbered stream message of the router; True when it is not the next one
        (one was lost between the router and here)."""
        if seq == 0:
            return False
        state.seq_in += 1
        return envelopes.skipped(state.seq_in, seq)

    def _convert(
        self, token: str, state: OpenAIState, reply: envelopes.Reply
    ) -> envelopes.Reply | None:
        """The reply to publish now (None: nothing, or a task publishes it later)."""
        match reply:
            case ReplyHead():
                return ReplyHead(headers=reply.headers, data=self._feed(state, reply.data))
            case ReplyChunk() | ReplyEnd() if self._skipped(state, reply.seq):
                self._forget(token)
                return envelopes.PART_LOST
            case ReplyChunk():
                data = self._feed(state, reply.data)
                if not data:
                    return None
                state.seq_out += 1
                return ReplyChunk(data=data, seq=state.seq_out)
            case ReplyEnd():
                data, before = self._end(state, reply.data)
                m.STREAM.done(state.stream_seconds)
                self._forget(token)
                # The edge holds the converted end until its usage is durable (``usage``).
                end = ReplyEnd(data=data, usage=reply.usage, seq=state.seq_out + 1)
                if before is not None:
                    self._spawn(state, self._then_publish(state, before, end))
                    return None
                return end
            case ReplyBody():
                self._forget(token)
                if reply.data_ref is not None:
                    self._spawn(state, self._unpack_body(state, reply))
                    return None
                data, before = state.conv.body(reply.data, cost_of(reply.headers))
                if before is None and len(data) <= self.claims.inline_limit:
                    return ReplyBody(
                        status=reply.status, headers=reply.headers, data=data, usage=reply.usage
                    )
                self._spawn(state, self._publish_body(state, reply, data, before))
                return None
            case ReplyError():
                self._forget(token)
                return reply
        return None

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
        self, state: OpenAIState, before: Callable[[], Awaitable[None]], end: ReplyEnd
    ) -> None:
        await before()  # before the final event: the next turn needs it
        await self.nc.publish(state.edge_reply_to, envelopes.encode(end))

    def _spawn(self, state: OpenAIState, coro: Coroutine[Any, Any, None]) -> None:
        self.tasks.spawn(self._guarded(state, coro))

    async def _guarded(self, state: OpenAIState, coro: Coroutine[Any, Any, None]) -> None:
        rid = logs.request_id.set(state.request_id)
        try:
            await coro
        except Exception:
            log.exception("reply conversion failed")
            await self._fail(state)
        finally:
            logs.request_id.reset(rid)

    def _forget(self, token: str) -> None:
        state = self.states.pop(token, None)
        if state is None:
            return
        self.beats.close(state.edge_reply_to)
        if self.by_request.get(state.uid) == token:
            del self.by_request[state.uid]

    def cancel(self, uid: str) -> None:
        token = self.by_request.get(uid)
        if token is not None:
            self._forget(token)

    async def end_all(self, reply: ReplyError) -> None:
        """Shutdown past the drain deadline: every request still relayed here gets ``reply``."""
        for token, state in list(self.states.items()):
            self._forget(token)
            with contextlib.suppress(Exception):
                await self.nc.publish(state.edge_reply_to, envelopes.encode(reply))

    async def watch(self) -> int:
        """Act on the requests whose router fell silent for ``OWNER_TIMEOUT``: send each once
        more if nothing of it was relayed yet, else tell the edge it failed. Returns how many."""
        limit = time.monotonic() - OWNER_TIMEOUT
        lost = [(t, s) for t, s in self.states.items() if s.heard < limit]
        for token, state in lost:
            if self.states.get(token) is not state:
                continue  # finished or cancelled while we were publishing
            route, state.route = state.route, None
            if route is None:
                m.ROUTER_LOST.labels("failed").inc()
                self._forget(token)
                with contextlib.suppress(Exception):
                    await self.nc.publish(state.edge_reply_to, envelopes.encode(OWNER_LOST))
                continue
            m.ROUTER_LOST.labels("retried").inc()
            # A new token: anything the silent router still sends is dropped, not mixed in.
            del self.states[token]
            new = str(next(self.seq))
            self.states[new] = state
            self.by_request[state.uid] = new
            with contextlib.suppress(Exception):  # NATS away: the next watch ends it
                await self._publish_route(new, state, envelopes.decode_route_request(route))
            state.route = None  # sent again once only
        return len(lost)
