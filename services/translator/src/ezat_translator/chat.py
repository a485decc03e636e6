"""The OpenAI Chat Completions path: translate, inline images, restore thinking, route, and
convert the router's Anthropic replies into OpenAI responses on their way to the edge.

Unlike the Anthropic API, the format changes on the way back, so the router replies to this
process's inbox; one wildcard subscription dispatches by sequence number to the request's state
(no task per request or per event). State is dropped on the final reply, on cancellation, or by a
sweep for requests whose router vanished.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from dataclasses import dataclass, field

import msgspec
from ezat_common import bus, envelopes, logs
from ezat_common.catalogue import Catalogue
from ezat_common.envelopes import ReplyBody, ReplyChunk, ReplyEnd, ReplyError, ReplyHead
from ezat_common.subjects import Subjects
from nats.aio.msg import Msg

from .core.anthropic_to_openai import ThinkingKept, to_chat_completion
from .core.chat_stream import ChatStream
from .core.openai_to_anthropic import ChatTranslation, to_messages_request
from .images import inline_images
from .thinking_store import ThinkingStore

log = logging.getLogger("ezat.translator.chat")

_encode_json = msgspec.json.Encoder().encode
STATE_MAX_AGE = 3600.0


@dataclass(slots=True)
class ChatState:
    request_id: str
    edge_reply_to: str
    response_model: str
    created: int
    stream: ChatStream | None
    started: float = field(default_factory=time.monotonic)


class ChatPath:
    def __init__(
        self,
        nc: bus.Client,
        subjects: Subjects,
        claims: bus.Claims,
        catalogue: Catalogue,
        thinking: ThinkingStore,
        instance: str,
        no_router_prefix: str,
    ) -> None:
        self.nc = nc
        self.subjects = subjects
        self.claims = claims
        self.catalogue = catalogue
        self.thinking = thinking
        self.prefix = subjects.inbox(instance)
        self.no_router_prefix = no_router_prefix
        self.seq = itertools.count(1)
        self.states: dict[str, ChatState] = {}
        self.by_request: dict[str, str] = {}

    async def start(self) -> None:
        await self.nc.subscribe(self.prefix + ".*", cb=self.on_reply)

    # ---- request -> router ----------------------------------------------------------------

    async def route(self, req: envelopes.ClientRequest, body: bytes) -> None:
        ct = to_messages_request(
            body, self.catalogue, session_header=req.session, cache_header=req.cache
        )
        if ct.image_urls:
            await inline_images(
                self.nc, self.subjects, self.claims, req.request_id, ct.body, ct.image_urls
            )
        if ct.thinking_requested and ct.tool_turns:
            await self._restore_thinking(ct)
        token = str(next(self.seq))
        created = int(time.time())
        stream = (
            ChatStream(
                request_id=req.request_id,
                response_model=ct.response_model,
                created=created,
                include_usage=ct.include_usage,
            )
            if ct.stream
            else None
        )
        self.states[token] = ChatState(
            req.request_id, req.reply_to, ct.response_model, created, stream
        )
        self.by_request[req.request_id] = token
        inline, ref = await self.claims.pack(_encode_json(ct.body))
        route = envelopes.RouteRequest(
            request_id=req.request_id,
            api="chat",
            key_id=req.key_id,
            model=ct.model.id,
            response_model=ct.response_model,
            stream=ct.stream,
            reply_to=f"{self.prefix}.{token}",
            client_reply_to=req.reply_to,
            received_at=req.received_at,
            body=inline,
            body_ref=ref,
            session_key=ct.session_key,
            prefix_hash=ct.prefix_hash,
            cache_ttl=ct.cache_ttl,
        )
        await self.nc.publish(
            self.subjects.route, envelopes.encode(route), reply=self.no_router_prefix + req.reply_to
        )

    async def _restore_thinking(self, ct: ChatTranslation) -> None:
        """Put each tool-calling turn's thinking back; if any is gone, drop thinking instead."""
        restored: list[tuple[int, list[dict[str, object]]]] = []
        for index, call_ids in ct.tool_turns:
            blocks = await self.thinking.find(call_ids)
            if blocks is None:
                log.info("thinking blocks of an earlier turn are gone; thinking off for this turn")
                ct.body.pop("thinking", None)
                config = ct.body.get("output_config")
                if isinstance(config, dict):
                    config.pop("effort", None)
                    if not config:
                        ct.body.pop("output_config", None)
                return
            restored.append((index, blocks))
        for index, blocks in restored:
            content = ct.body["messages"][index]["content"]
            content[:0] = blocks

    # ---- router -> edge -------------------------------------------------------------------

    async def on_reply(self, msg: Msg) -> None:
        token = msg.subject.rsplit(".", 1)[-1]
        state = self.states.get(token)
        if state is None:
            return
        rid = logs.request_id.set(state.request_id)
        try:
            await self._convert(token, state, envelopes.decode_reply(msg.data))
        except Exception:
            log.exception("reply conversion failed")
            self._forget(token)
            err = ReplyError(status=500, type="api_error", message="internal error; retry")
            await self.nc.publish(state.edge_reply_to, envelopes.encode(err))
        finally:
            logs.request_id.reset(rid)

    async def _convert(self, token: str, state: ChatState, reply: envelopes.Reply) -> None:
        out: envelopes.Reply | None
        match reply:
            case ReplyHead():
                out = reply
            case ReplyChunk():
                assert state.stream is not None
                data = state.stream.feed(reply.data)
                out = ReplyChunk(data=data) if data else None
            case ReplyEnd():
                assert state.stream is not None
                data = state.stream.feed(reply.data)
                self._forget(token)
                await self._keep(state.stream.kept_thinking)
                out = ReplyEnd(data=data)
            case ReplyBody():
                self._forget(token)
                anthropic_body = await self.claims.unpack(reply.data, reply.data_ref)
                data, kept = to_chat_completion(
                    anthropic_body,
                    request_id=state.request_id,
                    response_model=state.response_model,
                    created=state.created,
                )
                await self._keep(kept)
                inline, ref = await self.claims.pack(data)
                out = ReplyBody(
                    status=reply.status, headers=reply.headers, data=inline, data_ref=ref
                )
            case ReplyError():
                self._forget(token)
                out = reply
        if out is not None:
            await self.nc.publish(state.edge_reply_to, envelopes.encode(out))

    async def _keep(self, kept: ThinkingKept | None) -> None:
        if kept is not None and kept.blocks:
            await self.thinking.keep(kept.tool_call_ids, kept.blocks)

    def _forget(self, token: str) -> None:
        state = self.states.pop(token, None)
        if state is not None:
            self.by_request.pop(state.request_id, None)

    def cancel(self, request_id: str) -> None:
        token = self.by_request.get(request_id)
        if token is not None:
            self._forget(token)

    def sweep(self) -> None:
        """Drop states whose router never finished them (it died); the edge timed out already."""
        limit = time.monotonic() - STATE_MAX_AGE
        for token, state in list(self.states.items()):
            if state.started < limit:
                self._forget(token)

    async def sweep_forever(self) -> None:
        while True:
            await asyncio.sleep(60)
            self.sweep()
