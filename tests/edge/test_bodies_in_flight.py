"""Request-body bytes held at once, per key and per edge (docs/reliability.md, "Bodies in
flight"): many connections that declare a body and trickle it make their key's next body a 529
(OpenAI API: 503) with ``retry-after``, other keys go on, and every way a body's request ends gives
its bytes back (answered, timed out, client gone).

The edge runs in this process with its real ``serve()`` (tests/edge/harness.py); the trickling
clients are raw sockets, the others the official SDKs. Small limits: 1,000-byte bodies, 2,000
bytes per key, 3,000 per edge.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import anthropic
import openai
import pytest

from .harness import RunningEdge, new_key, raw, read_response, running_edge

MAX_BODY = 1000
PER_KEY = 2000
PER_EDGE = 3000
BODY_TIMEOUT = 1.5
MODEL = "claude-sonnet-5-5"


@pytest.fixture(scope="module")
async def edge(nats_url: str, database_url: str, redis_url: str) -> AsyncIterator[RunningEdge]:
    async with running_edge(
        nats_url,
        database_url,
        redis_url,
        max_body_bytes=MAX_BODY,
        body_bytes_in_flight=PER_EDGE,
        body_bytes_in_flight_per_key=PER_KEY,
        body_timeout=BODY_TIMEOUT,
        body_min_rate=10**9,
    ) as running:
        yield running


def _head(key: str, length: int | None, path: str = "/v1/messages") -> bytes:
    framing = f"content-length: {length}" if length is not None else "transfer-encoding: chunked"
    return (
        f"POST {path} HTTP/1.1\r\nHost: x\r\nx-api-key: {key}\r\n"
        f"content-type: application/json\r\n{framing}\r\n\r\n"
    ).encode()


async def _trickle(edge: RunningEdge, key: str, length: int) -> asyncio.StreamWriter:
    """A connection that declares a ``length``-byte body and sends one byte of it."""
    _, writer = await raw(edge.port)
    writer.write(_head(key, length) + b"{")
    await writer.drain()
    return writer


async def _held(edge: RunningEdge, total: int) -> None:
    async with asyncio.timeout(5):
        while edge.edge.api.body_bytes.held != total:
            await asyncio.sleep(0.01)


async def _claude_says(edge: RunningEdge, key: str) -> str:
    """The Messages answer to key's "hi" (the fake translator's "hi"), with the official SDK."""
    async with anthropic.AsyncAnthropic(base_url=edge.url, api_key=key, max_retries=0) as claude:
        msg = await claude.messages.create(
            model=MODEL, max_tokens=5, messages=[{"role": "user", "content": "hi"}]
        )
    block = msg.content[0]
    assert block.type == "text"
    return block.text


async def _gpt_says(edge: RunningEdge, key: str) -> str | None:
    async with openai.AsyncOpenAI(
        base_url=edge.url + "/openai/v1", api_key=key, max_retries=0
    ) as gpt:
        done = await gpt.chat.completions.create(
            model=MODEL, max_tokens=5, messages=[{"role": "user", "content": "hi"}]
        )
    return done.choices[0].message.content


async def test_one_keys_trickled_bodies_refuse_its_next_body_not_another_keys(
    edge: RunningEdge, database_url: str
) -> None:
    _, other = await new_key(database_url, "bodies-other")
    trickles = [await _trickle(edge, edge.key, MAX_BODY) for _ in range(2)]
    await _held(edge, 2 * MAX_BODY)
    with pytest.raises(anthropic.APIStatusError) as refused:
        await _claude_says(edge, edge.key)
    assert refused.value.status_code == 529
    assert refused.value.response.headers["retry-after"] == "2"
    error = refused.value.response.json()["error"]
    assert error["type"] == "overloaded_error"
    assert error["message"].startswith(
        f"request body: this key's requests in progress already hold {PER_KEY} bytes"
    )
    assert "limit of body bytes in flight per key" in error["message"]
    assert "retry once some of them have finished" in error["message"]
    # Another key is not held back by this one's bodies.
    assert await _claude_says(edge, other) == "hi"
    # The trickling clients leave: their bytes are given back, the key is served again.
    for writer in trickles:
        writer.close()
    await _held(edge, 0)
    assert await _claude_says(edge, edge.key) == "hi"


async def test_a_timed_out_body_gives_its_bytes_back(edge: RunningEdge) -> None:
    reader, writer = await raw(edge.port)
    writer.write(_head(edge.key, MAX_BODY) + b"{")
    await _held(edge, MAX_BODY)
    status, _, _ = await read_response(reader, timeout=BODY_TIMEOUT + 3)
    assert status == 408
    await _held(edge, 0)
    writer.close()


async def test_the_edges_limit_refuses_every_key_and_openai_gets_503(
    edge: RunningEdge, database_url: str
) -> None:
    _, second = await new_key(database_url, "bodies-second")
    _, third = await new_key(database_url, "bodies-third")
    trickles = [await _trickle(edge, edge.key, MAX_BODY) for _ in range(2)]
    trickles.append(await _trickle(edge, second, MAX_BODY))
    await _held(edge, PER_EDGE)
    with pytest.raises(openai.APIStatusError) as refused:
        await _gpt_says(edge, third)
    assert refused.value.status_code == 503
    assert refused.value.response.headers["retry-after"] == "2"
    error = refused.value.response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}  # OpenAI's envelope
    message = error["message"]
    assert message.startswith(f"request body: the gateway holds {PER_EDGE} bytes of request")
    assert "(its limit of body bytes in flight); retry shortly" in message
    # The clients leave: every reservation is given back at once.
    for writer in trickles:
        writer.close()
    await _held(edge, 0)
    assert await _gpt_says(edge, third) == "hi"


async def test_a_chunked_body_is_counted_as_it_grows(edge: RunningEdge) -> None:
    reader, writer = await raw(edge.port)
    writer.write(_head(edge.key, None))
    writer.write(b"258\r\n" + b" " * 600 + b"\r\n")  # 600 bytes of whitespace so far
    await _held(edge, 600)
    blockers = [await _trickle(edge, edge.key, n) for n in (MAX_BODY, 300)]
    await _held(edge, 1900)
    # 600 + 1000 + 300 held; 200 more bytes of the chunked body would pass the key's 2,000.
    writer.write(b"c8\r\n" + b" " * 200 + b"\r\n")
    status, headers, body = await read_response(reader, timeout=BODY_TIMEOUT + 3)
    assert status == 529
    assert json.loads(body)["error"]["type"] == "overloaded_error"
    assert headers["retry-after"] == "2"
    # The refused request gave back its 600 bytes as it was answered; the others as they left.
    await _held(edge, 1300)
    for blocker in blockers:
        blocker.close()
    await _held(edge, 0)
    writer.close()
