"""The OpenAI APIs' relayed requests (Chat Completions and Responses): the token table. Unlike
the Anthropic API, the format changes on the way back, so the router replies to this process's
inbox; one wildcard subscription dispatches by token to the request's state (no task per request
or per event), whose ``Exchange`` (ezat_common/exchange.py) says what each reply is, and whose
``Conversion`` turns it into the API's answer (converting.py). Their requests are translated and
routed by the translator's one request path (app.py, apis.py), which hands each route to
``open``. State is dropped on the final reply, on cancellation (matched on the request's ``uid``:
a client-chosen request id may be shared by other requests), or when no router is there.

Liveness (docs/reliability.md): while a state lives, the edge hears our heartbeats; the router
beats us in turn. A router silent for ``OWNER_TIMEOUT`` is dead (``watch`` ticks the exchanges):
the request is sent once more to a live router while it had no reply yet and its body is inline
(a claim is read once), else the edge is told it failed. A number skipped in the router's stream
ends it with ``PART_LOST``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time

from ezat_common import bus, envelopes, logs, tracing
from ezat_common.envelopes import (
    OWNER_LOST,
    PART_LOST,
    Heartbeat,
    ReplyChunk,
    ReplyEnd,
    ReplyError,
    ReplyHead,
)
from ezat_common.exchange import AGAIN, KINDS, LOST_OWNER, LOST_PART, Exchange, Kind
from ezat_common.liveness import Heartbeats
from ezat_common.subjects import Subjects
from ezat_common.tasks import TaskSet
from ezat_common.undecodable import decoded
from nats.aio.msg import Msg

from . import metrics as m
from .conversions import Conversion
from .converting import Converter
from .openai_state import OpenAIState

log = logging.getLogger("ezat.translator.chat")

# After the no-router prefix: the reply subject of a chat route names its state, not the edge.
NO_ROUTER_TAG = "chat."
_HEAD, _CHUNK = Kind.HEAD, Kind.CHUNK
_NUMBERED = (ReplyChunk, ReplyEnd)  # the stream messages the router numbers


class Relayed:
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
        self.converter = Converter(nc, claims, self.tasks)

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
        # A claim-checked body is read (and deleted) by the router: it cannot be sent twice.
        ex = Exchange(time.monotonic(), publishes=2 if route.body_ref is None else 1)
        state = OpenAIState(req.request_id, req.uid, req.key_id, req.reply_to, conv, ex)
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
        state.route = data if route.body_ref is None else None
        state.ex.published(time.monotonic())
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
        rid = logs.request_id.set(state.request_id)
        try:
            reply = decoded(envelopes.decode_reply, "reply", msg)
            if reply is None:
                state.ex.heard(time.monotonic())
                await self._abandon(token, state)
                return
            if type(reply) is Heartbeat:
                state.ex.heartbeat(reply.stream, time.monotonic())
                return
            for out in self.step(token, state, reply):
                await self.nc.publish(state.edge_reply_to, envelopes.encode(out))
            if type(reply) is ReplyHead and len(self.states) == 1:
                # Alone here, let the head's bytes be written before the next reply is
                # converted: when the router's end came in the same read, the client's first
                # token does not wait for the end's conversion too. With others in flight their
                # replies share the write, which costs less per stream (docs/performance.md,
                # "The head first when alone").
                await asyncio.sleep(0)
        except Exception:
            log.exception("reply conversion failed")
            await self._abandon(token, state)
        finally:
            logs.request_id.reset(rid)

    def step(self, token: str, state: OpenAIState, reply: envelopes.Reply) -> list[envelopes.Reply]:
        """What the edge gets for ``reply`` now, in order (none: nothing, or a task publishes
        it later): its exchange says whether it counts, its conversion what it becomes."""
        state.route = None  # the router answered: the request is its own now
        kind = KINDS[type(reply)]
        seq = reply.seq if isinstance(reply, _NUMBERED) else 0
        if state.ex.reply(kind, seq, time.monotonic()) is LOST_PART:
            self._forget(token)  # one was lost between the router and here
            return [PART_LOST]
        if kind is not _HEAD and kind is not _CHUNK:
            self._forget(token)  # its final reply
        return self.converter.convert(state, reply)

    async def _abandon(self, token: str, state: OpenAIState) -> None:
        self._forget(token)
        await self.converter.fail(state)

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
        """Tick the exchanges whose router fell silent for ``OWNER_TIMEOUT``: each is sent once
        more or the edge is told it failed, as its exchange says. Returns how many."""
        now = time.monotonic()
        lost = [(t, s) for t, s in self.states.items() if s.ex.wake_at() <= now]
        for token, state in lost:
            if self.states.get(token) is not state or state.ex.tick(now) is not LOST_OWNER:
                continue  # finished or cancelled while we were publishing
            # The bus's state is not asked: a publish while NATS reconnects is buffered.
            route, state.route = state.route, None
            if state.ex.lost(bus_up=True) is not AGAIN or route is None:
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
