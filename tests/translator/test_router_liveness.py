"""The OpenAI APIs' reply side watches the router a request went to, and beats the edge
meanwhile (docs/reliability.md). Real NATS; the router is whatever the test does on the route
subject."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import nats
import pytest
from ezat_common import envelopes, liveness
from ezat_common.catalogue import Catalogue
from ezat_common.config import load_config
from ezat_common.envelopes import ClientRequest, Heartbeat, ReplyChunk, ReplyHead, RouteRequest
from ezat_common.subjects import Subjects
from ezat_translator.app import Translator
from ezat_translator.responses_requests import ResponsesRequests
from nats.aio.client import Client
from nats.aio.msg import Msg

CONFIG = Path(__file__).parents[2] / "config" / "ezat.toml"
BODY = msgspec.json.encode(
    {
        "model": "claude-sonnet-5-5",
        "max_tokens": 16,
        "stream": True,
        "messages": [{"role": "user", "content": "hi"}],
    }
)
START = b'event: message_start\ndata: {"type":"message_start","message":{"id":"m","usage":{}}}\n\n'


class Wire:
    """A translator's request path and reply side on real NATS (neither its subscriptions nor
    its periodic watch: the tests watch), what reached the route subject and the edge's inbox."""

    def __init__(self, nc: Client, subjects: Subjects) -> None:
        self.nc = nc
        self.subjects = subjects
        catalogue = Catalogue(load_config(str(CONFIG)))
        self.translator = Translator(
            nc,
            subjects,
            catalogue,
            None,  # type: ignore[arg-type]  # no thinking in these requests
            responses=ResponsesRequests(catalogue),
        )
        self.beats = self.translator.beats
        self.path = self.translator.replies
        self.routes: list[RouteRequest] = []
        self.edge: list[envelopes.Reply] = []
        self.edge_inbox = f"_INBOX.{subjects.prefix}.edge-x.1"

    async def start(self) -> None:
        async def on_route(msg: Msg) -> None:
            self.routes.append(envelopes.decode_route_request(msg.data))

        async def on_edge(msg: Msg) -> None:
            self.edge.append(envelopes.decode_reply(msg.data))

        await self.path.start()
        await self.nc.subscribe(self.subjects.route, cb=on_route)
        await self.nc.subscribe(self.edge_inbox, cb=on_edge)
        await self.nc.flush()

    def request(self) -> ClientRequest:
        return ClientRequest(
            request_id="req-1",
            uid=uuid.uuid4().hex,
            api="chat",
            key_id="key-1",
            reply_to=self.edge_inbox,
            received_at=time.time(),
            body=BODY,
        )

    async def route(self, req: ClientRequest) -> None:
        """``req`` taken from the translate subject (off it, as every chat request is)."""
        await self.translator.handle(req, spawned=True)

    async def settle(self) -> None:
        await self.nc.flush()
        await asyncio.sleep(0.1)

    def age(self, seconds: float) -> None:
        """As if the router had been silent for ``seconds`` (the watch ticks each request's
        exchange, which knows when it last heard from its router)."""
        for state in self.path.states.values():
            state.ex.received -= seconds


@pytest.fixture
async def wire(nats_url: str) -> AsyncIterator[Wire]:
    nc = await nats.connect(nats_url)
    w = Wire(nc, Subjects(prefix=f"rl{uuid.uuid4().hex[:8]}"))
    await w.start()
    try:
        yield w
    finally:
        await nc.close()


async def test_the_edge_hears_from_the_translator_while_it_holds_a_request(wire: Wire) -> None:
    await wire.route(wire.request())
    assert wire.edge_inbox in wire.beats  # a stream: the edge may commit it on these beats
    await asyncio.sleep(liveness.HEARTBEAT_INTERVAL)
    assert await wire.beats.beat_once() == 1
    await wire.settle()
    assert wire.edge == [Heartbeat(stream=True)]


async def test_a_router_silent_before_its_first_reply_gets_the_request_once_more(
    wire: Wire,
) -> None:
    req = wire.request()
    await wire.route(req)
    await wire.settle()
    wire.age(liveness.OWNER_TIMEOUT + 0.1)
    assert await wire.path.watch() == 1
    await wire.settle()
    first, again = wire.routes
    assert again.uid == first.uid == req.uid
    assert again.body == first.body
    assert again.reply_to != first.reply_to  # replies of the silent router are not mixed in
    # Still the request of the edge's client: nothing was told to the edge.
    assert wire.edge == []
    assert wire.edge_inbox in wire.beats

    # The second router dies too: the edge is told, once, and the request is forgotten.
    wire.age(liveness.OWNER_TIMEOUT + 0.1)
    assert await wire.path.watch() == 1
    await wire.settle()
    assert wire.edge == [envelopes.OWNER_LOST]
    assert len(wire.routes) == 2
    assert wire.path.states == {} and wire.path.by_request == {}
    assert wire.edge_inbox not in wire.beats


async def test_a_router_that_beats_is_not_taken_for_dead(wire: Wire) -> None:
    await wire.route(wire.request())
    await wire.settle()
    route = wire.routes[0]
    wire.age(liveness.OWNER_TIMEOUT + 0.1)
    await wire.nc.publish(route.reply_to, envelopes.encode(Heartbeat(stream=True)))
    await wire.settle()
    assert await wire.path.watch() == 0
    assert len(wire.routes) == 1 and wire.edge == []  # a heartbeat is not relayed


async def test_a_router_silent_after_the_stream_started_ends_it_at_the_edge(wire: Wire) -> None:
    await wire.route(wire.request())
    await wire.settle()
    route = wire.routes[0]
    await wire.nc.publish(route.reply_to, envelopes.encode(ReplyHead(data=START)))
    await wire.settle()
    wire.age(liveness.OWNER_TIMEOUT + 0.1)
    assert await wire.path.watch() == 1
    await wire.settle()
    # Never sent again once something reached the edge: the client would see it twice.
    assert len(wire.routes) == 1
    assert [type(r) for r in wire.edge] == [ReplyHead, envelopes.ReplyError]
    assert wire.edge[-1] == envelopes.OWNER_LOST
    # Late replies of that router are dropped.
    await wire.nc.publish(route.reply_to, envelopes.encode(ReplyChunk(data=b"")))
    await wire.settle()
    assert len(wire.edge) == 2


async def test_a_number_skipped_by_the_router_ends_the_stream_at_the_edge(wire: Wire) -> None:
    """The route's exchange checks the router's numbering: a chunk lost between the router and
    here ends the stream with PART_LOST, never sent again, and the request is forgotten."""
    req = wire.request()
    await wire.route(req)
    await wire.settle()
    route = wire.routes[0]
    await wire.nc.publish(route.reply_to, envelopes.encode(ReplyHead(data=START)))
    await wire.nc.publish(route.reply_to, envelopes.encode(ReplyChunk(data=b"", seq=2)))
    await wire.settle()
    assert [type(r) for r in wire.edge] == [ReplyHead, envelopes.ReplyError]
    assert wire.edge[-1] == envelopes.PART_LOST
    assert wire.path.states == {} and wire.path.by_request == {}
    assert wire.edge_inbox not in wire.beats
    wire.age(liveness.OWNER_TIMEOUT + 0.1)
    assert await wire.path.watch() == 0 and len(wire.routes) == 1
