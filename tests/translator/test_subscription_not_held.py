"""The translate subscription runs its callbacks one at a time, so a request that waits on
something (Redis, the object store, a download) is sent off it, and one that waits on nothing
is handled in it, a task fewer (app.py, ``on_request``; docs/performance.md). Real NATS; the
thinking store's Redis is a listener that accepts and never answers (a hung Redis), and the
router is whatever reaches the route subject. The Responses API's store is PostgreSQL at an
address whose listener never answers either (a hung database)."""

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
from ezat_common import envelopes, kv
from ezat_common.catalogue import Catalogue
from ezat_common.config import load_config
from ezat_common.envelopes import Api, ClientRequest, ReplyError
from ezat_common.redis_keys import RedisKeys
from ezat_common.subjects import Subjects
from ezat_translator.app import Translator
from ezat_translator.responses_requests import ResponsesRequests
from ezat_translator.stored_responses import StoredResponses
from ezat_translator.thinking_store import REDIS_TIMEOUT, ThinkingStore
from nats.aio.msg import Msg

CONFIG = Path(__file__).parents[2] / "config" / "ezat.toml"
MODEL = "claude-sonnet-5-5"
CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
# A tool turn sent back with reasoning: its thinking is looked up in Redis before it is routed.
RESTORES: dict[str, Any] = {
    "model": MODEL,
    "reasoning_effort": "low",
    "tools": [{"type": "function", "function": {"name": "f"}}],
    "messages": [
        {"role": "user", "content": "restores"},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "c1", "content": "done"},
    ],
}
PLAIN: dict[str, Any] = {"model": MODEL, "messages": [{"role": "user", "content": "plain"}]}


async def _hung_redis() -> tuple[asyncio.Server, int]:
    """A TCP listener that takes connections and never answers."""

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while await reader.read(65536):  # read what is asked, answer nothing, till it leaves
            pass
        writer.close()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


@pytest.fixture
async def wired(
    nats_url: str, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[Translator, Subjects, list[str]]]:
    """A translator on its translate subscription, thinking kept in a hung Redis, responses in
    a hung PostgreSQL; the first user message of each route, in the order the routes were
    published."""
    server, port = await _hung_redis()
    monkeypatch.setenv("DATABASE_URL", f"postgresql://ezat@127.0.0.1:{port}/ezat")
    redis = kv.connect(f"redis://127.0.0.1:{port}/0", timeout=REDIS_TIMEOUT)
    subjects = Subjects(prefix=f"sub{uuid.uuid4().hex[:8]}")
    nc = await nats.connect(nats_url)
    catalogue = Catalogue(load_config(str(CONFIG)))
    translator = Translator(
        nc,
        subjects,
        catalogue,
        ThinkingStore(redis, RedisKeys(subjects.prefix)),
        responses=ResponsesRequests(catalogue, store=StoredResponses()),
    )
    routed: list[str] = []

    async def on_route(msg: Msg) -> None:
        route = envelopes.decode_route_request(msg.data)
        content = msgspec.json.decode(route.body)["messages"][0]["content"]
        routed.append(content if isinstance(content, str) else content[0]["text"])

    try:
        await translator.replies.start()
        await nc.subscribe(subjects.route, cb=on_route)
        await nc.subscribe(subjects.translate, cb=translator.on_request)
        await nc.flush()
        yield translator, subjects, routed
    finally:
        translator.tasks.cancel()
        await translator.tasks.wait(1.0)
        await nc.close()
        await redis.aclose()
        server.close()
        await server.wait_closed()


def _request(body: dict[str, Any], api: Api = "chat", reply_to: str = "") -> bytes:
    return envelopes.encode(
        ClientRequest(
            request_id=f"req-{uuid.uuid4().hex[:6]}",
            uid=uuid.uuid4().hex,
            api=api,
            key_id="key-1",
            reply_to=reply_to or f"_INBOX.edge-x.{uuid.uuid4().hex[:6]}",
            received_at=time.time(),
            body=msgspec.json.encode(body),
        )
    )


async def test_a_thinking_restore_on_a_hung_redis_does_not_hold_up_the_next_request(
    wired: tuple[Translator, Subjects, list[str]],
) -> None:
    translator, subjects, routed = wired
    await translator.nc.publish(subjects.translate, _request(RESTORES))
    await translator.nc.publish(subjects.translate, _request(PLAIN))
    deadline = time.monotonic() + 10 * REDIS_TIMEOUT + 5
    while len(routed) < 2 and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    # The plain request went on while the other waited out Redis's timeout; that one was then
    # routed too, its thinking off.
    assert routed == ["plain", "restores"]


# The Responses API: one that continues a stored response reads the store first; one that does
# not (store false, no previous_response_id: as the Codex CLI sends it) waits on nothing.
CONTINUES = {
    "model": MODEL,
    "input": "continues",
    "previous_response_id": "resp_0123456789abcdef",
    "store": False,
}
STATELESS = {"model": MODEL, "input": "plain", "store": False}


async def test_a_continuation_on_a_hung_store_does_not_hold_up_the_next_request(
    wired: tuple[Translator, Subjects, list[str]],
) -> None:
    translator, subjects, routed = wired
    nc = translator.nc
    replies: asyncio.Queue[Msg] = asyncio.Queue()
    inbox = f"_INBOX.edge-y.{uuid.uuid4().hex[:6]}"
    await nc.subscribe(inbox, cb=replies.put)
    await nc.publish(subjects.translate, _request(CONTINUES, "responses", inbox))
    await nc.publish(subjects.translate, _request(STATELESS, "responses"))
    deadline = time.monotonic() + 10
    while not routed and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert routed == ["plain"]
    # Routed while the continuation still waited on the store, which it then could not read.
    assert replies.empty()
    async with asyncio.timeout(10):
        reply = envelopes.decode_reply((await replies.get()).data)
    assert isinstance(reply, ReplyError) and reply.status == 503, reply


async def test_a_stateless_responses_request_is_translated_in_the_callback(
    wired: tuple[Translator, Subjects, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    translator, subjects, routed = wired
    spawned: list[str] = []
    spawn = translator.tasks.spawn

    def counted(coro: Any, **kw: Any) -> Any:
        spawned.append(coro.__qualname__)
        return spawn(coro, **kw)

    monkeypatch.setattr(translator.tasks, "spawn", counted)
    await translator.nc.publish(subjects.translate, _request(STATELESS, "responses"))
    await translator.nc.publish(subjects.translate, _request(CONTINUES, "responses"))
    deadline = time.monotonic() + 10
    while not (spawned and routed) and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert routed == ["plain"]
    # Only the continuation went to a task of its own: the rest of its translation.
    assert spawned == ["Translator.route_in_task"]
