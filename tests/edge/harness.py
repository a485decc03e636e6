"""An edge running in this process (its real ``serve()``: the runner, protocol and limits of
``ezat serve edge``) on the session's NATS, PostgreSQL and Redis, with subjects of its own; a fake
translator answers its model requests, and holds them while a test says so."""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import nats
from aiohttp import web
from ezat_common import db, envelopes
from ezat_common.config import Config, EdgeConfig
from ezat_common.envelopes import ReplyBody
from ezat_common.subjects import Subjects
from ezat_edge.app import Edge, connect, serve
from nats.aio.client import Client
from nats.aio.msg import Msg

MESSAGE = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-5-5",
    "content": [{"type": "text", "text": "hi"}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 3, "output_tokens": 1},
}
COMPLETION = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 0,
    "model": "claude-sonnet-5-5",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "hi", "refusal": None},
            "finish_reason": "stop",
            "logprobs": None,
        }
    ],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
}


@dataclass
class FakeTranslator:
    """Answers every ClientRequest with a complete body; waits for ``gate`` first when set."""

    gate: asyncio.Event | None = None
    received: list[envelopes.ClientRequest] = field(default_factory=list)
    # The NATS headers each request came with (its traceparent), by request id.
    headers: dict[str, dict[str, str]] = field(default_factory=dict)

    async def on_request(self, msg: Msg, nc: Client) -> None:
        env = envelopes.decode_client_request(msg.data)
        self.received.append(env)
        self.headers[env.request_id] = dict(msg.headers or {})
        if self.gate is not None:
            await self.gate.wait()
        body = COMPLETION if env.api == "chat" else MESSAGE
        reply = ReplyBody(status=200, data=json.dumps(body).encode())
        await nc.publish(env.reply_to, envelopes.encode(reply))


@dataclass
class RunningEdge:
    edge: Edge
    runner: web.AppRunner
    url: str
    port: int
    key: str
    key_id: str
    nc: Client
    subjects: Subjects
    translator: FakeTranslator


@contextmanager
def environment(**values: str) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


async def new_key(database_url: str, name: str = "edge-test") -> tuple[str, str]:
    conn = await asyncpg.connect(database_url)
    try:
        key, secret = await db.create_key(conn, name)
    finally:
        await conn.close()
    return key.id, secret


@asynccontextmanager
async def running_edge(
    nats_url: str, database_url: str, redis_url: str, **edge: Any
) -> AsyncIterator[RunningEdge]:
    """An edge on 127.0.0.1 (a free port) with ``[edge]`` settings ``edge``."""
    cfg = Config(edge=EdgeConfig(listen="127.0.0.1:0", **edge))
    subjects = Subjects(prefix=f"edge{uuid.uuid4().hex[:8]}")
    with environment(NATS_URL=nats_url, DATABASE_URL=database_url, REDIS_URL=redis_url):
        instance = await connect(cfg, subjects)
        runner, port = await serve(instance, cfg)
        nc = await nats.connect(nats_url)
        translator = FakeTranslator()
        answering: set[asyncio.Task[None]] = set()

        async def on_translate(msg: Msg) -> None:
            task = asyncio.ensure_future(translator.on_request(msg, nc))
            answering.add(task)
            task.add_done_callback(answering.discard)

        await nc.subscribe(subjects.translate, cb=on_translate)
        key_id, secret = await new_key(database_url)
        while instance.auth.pool is None:
            await asyncio.sleep(0.02)
        try:
            yield RunningEdge(
                instance,
                runner,
                f"http://127.0.0.1:{port}",
                port,
                secret,
                key_id,
                nc,
                subjects,
                translator,
            )
        finally:
            if translator.gate is not None:
                translator.gate.set()
            await runner.cleanup()
            await instance.stop()
            await nc.close()


async def raw(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", port)


async def read_response(
    reader: asyncio.StreamReader, timeout: float = 5.0
) -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.1 response with a content-length body: status, headers (lower-case), body."""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    body = await asyncio.wait_for(reader.readexactly(int(headers.get("content-length", 0))), 5)
    return status, headers, body


async def closed_within(reader: asyncio.StreamReader, timeout: float) -> bool:
    """True when the server closes the connection within ``timeout`` (anything sent first is
    read and dropped)."""
    try:
        async with asyncio.timeout(timeout):
            while await reader.read(65536):
                pass
        return True
    except TimeoutError:
        return False
    except ConnectionError:
        return True
