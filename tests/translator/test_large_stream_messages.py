"""A converted stream above NATS's max_payload goes to the edge as several numbered messages
(docs/reliability.md, "Large stream messages"; core/sse_split.py). Each Responses web search
carries its sealed ``web_search_call`` id (the search's results) in five events, so one router
chunk of a few searches converts to a message several times its size. Real NATS and the real
sealer; the router is what the test publishes to the route's reply subject; the edge is the
test's subscription (each message's size and number), then the edge's real relay serving the
openai SDK over HTTP."""

from __future__ import annotations

import asyncio
import base64
import random
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import nats
import openai
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from ezat_common import bus, envelopes
from ezat_common.catalogue import Catalogue
from ezat_common.config import load_config
from ezat_common.envelopes import ClientRequest, ReplyChunk, ReplyEnd, ReplyHead, RouteRequest
from ezat_common.subjects import Subjects
from ezat_edge.call import Call
from ezat_edge.relay import Relay
from ezat_translator.app import Translator
from ezat_translator.core.anthropic_to_responses import ResponseMeta
from ezat_translator.core.responses_stream import ResponsesStream
from ezat_translator.core.sealing import Sealer
from ezat_translator.core.sse_split import pieces
from ezat_translator.responses_requests import ResponsesRequests
from nats.aio.client import Client
from nats.aio.msg import Msg
from openai.types.responses import Response
from support.anthropic_streams import anthropic_stream
from support.responses_sse import accumulate

CONFIG = Path(__file__).parents[2] / "config" / "ezat.toml"
SEALER = Sealer([("k1", bytes(32))])
TENANT = "key-1"


def searched_answer(searches: int, results: int, size: int) -> dict[str, Any]:
    """A Messages answer with ``searches`` searches of ``results`` results, each with ``size``
    bytes of ``encrypted_content`` (random: it does not compress), and a text citing one."""
    rnd = random.Random(31)
    content: list[dict[str, Any]] = []
    for n in range(searches):
        use_id = f"srvtoolu_{n}"
        found = [
            {
                "type": "web_search_result",
                "url": f"https://site{k}.example/{n}",
                "title": f"page {k}",
                "page_age": "May 1, 2026",
                "encrypted_content": base64.b64encode(rnd.randbytes(size * 3 // 4)).decode(),
            }
            for k in range(results)
        ]
        content.append(
            {"type": "server_tool_use", "id": use_id, "name": "web_search", "input": {"q": n}}
        )
        content.append({"type": "web_search_tool_result", "tool_use_id": use_id, "content": found})
    cite = {"type": "web_search_result_location", "url": "https://site0.example/0"}
    content.append({"type": "text", "text": "The answer.", "citations": [{**cite, "title": "p"}]})
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": content,
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 9,
            "output_tokens": 4,
            "server_tool_use": {"web_search_requests": 5},
        },
    }


class Edge:
    """The edge's inbox: every message's size and reply, in arrival order."""

    def __init__(self) -> None:
        self.sizes: list[int] = []
        self.replies: list[envelopes.Reply] = []
        self.ended = asyncio.Event()

    async def on_msg(self, msg: Msg) -> None:
        self.sizes.append(len(msg.data))
        reply = envelopes.decode_reply(msg.data)
        self.replies.append(reply)
        if not isinstance(reply, ReplyHead | ReplyChunk):
            self.ended.set()


@pytest.fixture
async def nc(nats_url: str) -> AsyncIterator[Client]:
    conn = await nats.connect(nats_url)
    yield conn
    await conn.close()


async def _routed(nc: Client, edge: Edge) -> RouteRequest:
    """A streamed Responses request with web search, through the translator's request path."""
    subjects = Subjects(prefix=f"big{uuid.uuid4().hex[:8]}")
    catalogue = Catalogue(load_config(str(CONFIG)))
    responses = ResponsesRequests(catalogue, sealer=SEALER)
    translator = Translator(nc, subjects, catalogue, None, responses=responses)  # type: ignore[arg-type]
    routes: asyncio.Queue[RouteRequest] = asyncio.Queue()

    async def on_route(msg: Msg) -> None:
        routes.put_nowait(envelopes.decode_route_request(msg.data))

    await translator.replies.start()
    await nc.subscribe(subjects.route, cb=on_route)
    inbox = f"_INBOX.{subjects.prefix}.edge.1"
    await nc.subscribe(inbox, cb=edge.on_msg)
    await nc.flush()
    body = {
        "model": "claude-sonnet-5-5",
        "input": "search five times",
        "stream": True,
        "tools": [{"type": "web_search", "search_context_size": "high"}],
    }
    req = ClientRequest(
        request_id="req-big",
        uid=uuid.uuid4().hex,
        api="responses",
        key_id=TENANT,
        reply_to=inbox,
        received_at=time.time(),
        body=msgspec.json.encode(body),
    )
    await translator.handle(req, spawned=True)
    return await asyncio.wait_for(routes.get(), 10)


def _converted_size(start: bytes, middle: bytes) -> int:
    """The bytes ``middle`` converts to: what one message would have had to carry."""
    meta = ResponseMeta(request_id="r", response_model="m", created_at=1)
    stream = ResponsesStream(meta, lambda blocks: SEALER.seal(TENANT, blocks))
    stream.feed(start)
    return len(stream.feed(middle))


def _router_replies() -> list[envelopes.Reply]:
    """What a router sends for a deployment's stream of five large searches read in one go:
    the start, every search and the text in one chunk, the final frames."""
    raw = anthropic_stream(searched_answer(5, 10, 4096))
    frames = [f + b"\n\n" for f in raw.split(b"\n\n") if f.strip()]
    start, middle, tail = frames[0], b"".join(frames[1:-2]), b"".join(frames[-2:])
    return [ReplyHead(data=start), ReplyChunk(data=middle, seq=1), ReplyEnd(data=tail, seq=2)]


def _every_search(final: Response) -> None:
    """``final`` completed with the five searches, each id opening to its ten results."""
    assert final.status == "completed"
    searches = [item for item in final.output if item.type == "web_search_call"]
    assert len(searches) == 5
    for n, item in enumerate(searches):
        blocks = SEALER.open(TENANT, item.id.removeprefix("ws_"), "id")
        assert blocks is not None and blocks[0]["id"] == f"srvtoolu_{n}"
        assert len(blocks[1]["content"]) == 10


async def test_five_large_searches_in_one_router_chunk_reach_the_edge_whole(nc: Client) -> None:
    edge = Edge()
    route = await _routed(nc, edge)
    replies = _router_replies()
    start, middle = replies[0].data, replies[1].data  # type: ignore[union-attr]
    # The router's chunk fits easily; converted, it would not fit in one message.
    assert len(middle) < nc.max_payload // 2 < nc.max_payload < _converted_size(start, middle)
    for reply in replies:
        await nc.publish(route.reply_to, envelopes.encode(reply))
    await asyncio.wait_for(edge.ended.wait(), 10)

    head, *chunks, end = edge.replies
    assert isinstance(head, ReplyHead) and isinstance(end, ReplyEnd), edge.replies
    assert all(isinstance(c, ReplyChunk) for c in chunks)
    # Several messages, none above the server's limit, numbered 1, 2, ... and the end next.
    assert len(chunks) >= 2 and max(edge.sizes) <= nc.max_payload
    assert [c.seq for c in chunks] == list(range(1, len(chunks) + 1))  # type: ignore[union-attr]
    assert end.seq == len(chunks) + 1
    # The same bytes as one piece, which the SDK reads as the whole answer.
    joined = head.data + b"".join(c.data for c in chunks) + end.data  # type: ignore[union-attr]
    final, _ = accumulate(joined)
    assert final is not None
    _every_search(final)


async def test_through_the_edge_the_sdk_gets_every_search(nc: Client) -> None:
    """The edge's real relay between the openai SDK and the translator: the stream the SDK
    reads over HTTP is whole, each search with its sealed results."""
    subjects = Subjects(prefix=f"bige{uuid.uuid4().hex[:8]}")
    catalogue = Catalogue(load_config(str(CONFIG)))
    responses = ResponsesRequests(catalogue, sealer=SEALER)
    translator = Translator(nc, subjects, catalogue, None, responses=responses)  # type: ignore[arg-type]
    await translator.replies.start()
    inbox = bus.Inbox(nc, subjects, "edge.test")
    await inbox.start()
    claims = bus.Claims(nc, subjects, "edge")
    relay = Relay(nc, subjects, inbox, claims, first_reply_timeout=30.0, ping_interval=15.0)
    tasks: set[asyncio.Task[None]] = set()

    async def on_translate(msg: Msg) -> None:
        env = envelopes.decode_client_request(msg.data)
        tasks.add(asyncio.ensure_future(translator.handle(env, spawned=True)))

    async def on_route(msg: Msg) -> None:
        route = envelopes.decode_route_request(msg.data)
        for reply in _router_replies():
            await nc.publish(route.reply_to, envelopes.encode(reply))

    await nc.subscribe(subjects.translate, cb=on_translate)
    await nc.subscribe(subjects.route, cb=on_route)
    await nc.flush()

    async def handler(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        env = ClientRequest(
            request_id=f"req-{uuid.uuid4().hex[:8]}",
            uid=uuid.uuid4().hex,
            api="responses",
            key_id=TENANT,
            reply_to="",
            received_at=time.time(),
        )
        call = Call(request, env.request_id, "responses", env, {}, time.monotonic())
        return await relay.run(call, body)

    app = web.Application()
    app.router.add_post("/v1/responses", handler)
    async with (
        TestServer(app) as server,
        openai.AsyncOpenAI(
            base_url=str(server.make_url("/v1")), api_key="k", max_retries=0
        ) as client,
        client.responses.stream(
            model="claude-sonnet-5-5",
            input="search five times",
            tools=[{"type": "web_search", "search_context_size": "high"}],
        ) as stream,
    ):
        final = await stream.get_final_response()
    _every_search(final)
    await asyncio.gather(*tasks)


def test_pieces_cut_between_events_and_join_back() -> None:
    events = [f"data: {'x' * n}\n\n".encode() for n in (10, 30, 5, 50, 1, 20)]
    data = b"".join(events)
    assert pieces(data, len(data)) == [data]
    out = pieces(data, 40)
    assert b"".join(out) == data and all(len(p) <= 40 for p in out)
    # Whole events wherever one fits: only the 58-byte event is cut inside.
    assert out[0] == events[0] and out[1] == events[1]
    assert out[-1] == events[-1]


def test_an_event_above_the_limit_alone_is_cut_inside() -> None:
    data = b"data: " + b"y" * 100 + b"\n\n"
    out = pieces(data, 32)
    assert b"".join(out) == data and [len(p) for p in out] == [32, 32, 32, 12]
