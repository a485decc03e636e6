"""The translator's translation series (docs/observability.md, "Translator"): the whole
``Translator`` on real NATS, the test playing the edge and the router, the registry read in
this process."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import nats
import pytest
from edge.harness import MESSAGE
from ezat_common import envelopes
from ezat_common.catalogue import Catalogue
from ezat_common.config import load_config
from ezat_common.envelopes import ClientRequest, ReplyBody, ReplyEnd, ReplyHead, RouteRequest
from ezat_common.redis_keys import RedisKeys
from ezat_common.subjects import Subjects
from ezat_translator.app import Translator
from ezat_translator.thinking_store import ThinkingStore
from nats.aio.client import Client
from nats.aio.msg import Msg
from prometheus_client import REGISTRY

CONFIG = Path(__file__).parents[2] / "config" / "ezat.toml"
CHAT = {
    "model": "claude-sonnet-5-5",
    "max_tokens": 16,
    "messages": [{"role": "user", "content": "hi"}],
}
START = (
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"m","type":"message",'
    b'"role":"assistant","model":"m","content":[],"usage":{"input_tokens":3,"output_tokens":1}}}\n\n'
)
STOP = (
    b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},'
    b'"usage":{"output_tokens":1}}\n\nevent: message_stop\ndata: {"type":"message_stop"}\n\n'
)


def translations(direction: str, outcome: str) -> float:
    labels = {"direction": direction, "outcome": outcome}
    return REGISTRY.get_sample_value("ezat_translator_translations_total", labels) or 0.0


def timed(direction: str) -> float:
    labels = {"direction": direction}
    return REGISTRY.get_sample_value("ezat_translator_translation_seconds_count", labels) or 0.0


class Wire:
    """A translator on real NATS; routes and edge replies as they arrive."""

    def __init__(self, nc: Client, subjects: Subjects) -> None:
        self.nc = nc
        self.subjects = subjects
        thinking = ThinkingStore(None, RedisKeys(subjects.prefix))
        self.translator = Translator(nc, subjects, Catalogue(load_config(str(CONFIG))), thinking)
        self.routes: asyncio.Queue[RouteRequest] = asyncio.Queue()
        self.edge: asyncio.Queue[envelopes.Reply] = asyncio.Queue()
        self.edge_inbox = f"_INBOX.{subjects.prefix}.edge.1"

    async def start(self) -> None:
        async def on_route(msg: Msg) -> None:
            await self.routes.put(envelopes.decode_route_request(msg.data))

        async def on_edge(msg: Msg) -> None:
            await self.edge.put(envelopes.decode_reply(msg.data))

        await self.translator.start()
        await self.nc.subscribe(self.subjects.route, cb=on_route)
        await self.nc.subscribe(self.edge_inbox, cb=on_edge)
        await self.nc.flush()

    async def chat(self, **body: Any) -> None:
        req = ClientRequest(
            request_id=f"req-{uuid.uuid4().hex[:8]}",
            uid=uuid.uuid4().hex,
            api="chat",
            key_id="key-1",
            reply_to=self.edge_inbox,
            received_at=time.time(),
            body=msgspec.json.encode({**CHAT, **body}),
        )
        await self.nc.publish(self.subjects.translate, envelopes.encode(req))

    async def route(self) -> RouteRequest:
        return await asyncio.wait_for(self.routes.get(), 5)

    async def reply(self) -> envelopes.Reply:
        return await asyncio.wait_for(self.edge.get(), 5)


@pytest.fixture
async def wire(nats_url: str) -> AsyncIterator[Wire]:
    nc = await nats.connect(nats_url)
    w = Wire(nc, Subjects(prefix=f"tm{uuid.uuid4().hex[:8]}"))
    await w.start()
    try:
        yield w
    finally:
        await w.translator.stop(1.0)
        await nc.close()


async def test_a_translated_request_and_its_response_count_ok(wire: Wire) -> None:
    request_ok, response_ok, timed_before = (
        translations("request", "ok"),
        translations("response", "ok"),
        timed("request"),
    )
    await wire.chat()
    route = await wire.route()
    assert translations("request", "ok") == request_ok + 1
    assert timed("request") == timed_before + 1

    body = msgspec.json.encode(MESSAGE)
    await wire.nc.publish(route.reply_to, envelopes.encode(ReplyBody(status=200, data=body)))
    reply = await wire.reply()
    assert isinstance(reply, ReplyBody)
    assert msgspec.json.decode(reply.data)["object"] == "chat.completion"
    assert translations("response", "ok") == response_ok + 1


async def test_a_refused_request_counts_rejected_and_is_not_routed(wire: Wire) -> None:
    rejected, ok = translations("request", "rejected"), translations("request", "ok")
    await wire.chat(n=2)
    reply = await wire.reply()
    assert isinstance(reply, envelopes.ReplyError) and reply.status == 400
    assert translations("request", "rejected") == rejected + 1
    assert translations("request", "ok") == ok
    assert wire.routes.empty()


async def test_a_stream_counts_once_when_it_ends(wire: Wire) -> None:
    ok, count = translations("stream", "ok"), timed("stream")
    await wire.chat(stream=True)
    route = await wire.route()
    await wire.nc.publish(route.reply_to, envelopes.encode(ReplyHead(data=START)))
    assert isinstance(await wire.reply(), ReplyHead)
    assert translations("stream", "ok") == ok  # not per chunk: once, at its end
    await wire.nc.publish(route.reply_to, envelopes.encode(ReplyEnd(data=STOP, seq=1)))
    end = await wire.reply()
    assert isinstance(end, ReplyEnd) and b"[DONE]" in end.data
    assert translations("stream", "ok") == ok + 1
    assert timed("stream") == count + 1
