"""Keep-alives during pauses (both APIs), and a tool loop that survives losing its kept thinking."""

from __future__ import annotations

import time
from typing import Any

import aiohttp
import openai
from ezat_common.redis_keys import RedisKeys
from redis import asyncio as aioredis

from .conftest import PREFIX, Gateway

MODEL = "anthropic/claude-sonnet-5-5"
PAUSE = "[sim:tokens=3] [sim:first_token_ms=2600]"  # > 2 x the test config's 1 s ping interval


async def raw_lines(
    http: aiohttp.ClientSession, url: str, body: dict[str, Any], key: str
) -> list[bytes]:
    headers = {"authorization": f"Bearer {key}"}
    async with http.post(url, json=body, headers=headers) as resp:
        assert resp.status == 200
        return [line async for line in resp.content]


async def test_openai_stream_sends_ping_comments_during_a_pause(
    gateway: Gateway, http: aiohttp.ClientSession
) -> None:
    body = {
        "model": MODEL,
        "stream": True,
        "messages": [{"role": "user", "content": f"slow start {PAUSE}"}],
    }
    lines = await raw_lines(http, gateway.url + "/openai/v1/chat/completions", body, gateway.key)
    first_content = next(i for i, ln in enumerate(lines) if b'"content":" ' in ln)
    pings = [i for i, ln in enumerate(lines) if ln == b": ping\n"]
    assert len(pings) >= 2, lines[:8]
    assert pings[0] < first_content
    assert lines[-2:] == [b"data: [DONE]\n", b"\n"]


async def test_anthropic_stream_sends_ping_events_during_a_pause(
    gateway: Gateway, http: aiohttp.ClientSession
) -> None:
    body = {
        "model": MODEL,
        "max_tokens": 16,
        "stream": True,
        "messages": [{"role": "user", "content": f"slow start {PAUSE}"}],
    }
    lines = await raw_lines(http, gateway.url + "/v1/messages", body, gateway.key)
    first_delta = lines.index(b"event: content_block_delta\n")
    pings = [i for i, ln in enumerate(lines) if ln == b"event: ping\n"]
    assert len(pings) >= 2
    assert pings[0] < first_delta


async def test_tool_loop_survives_losing_its_kept_thinking(gateway: Gateway) -> None:
    """Kept thinking gone (Redis flushed, TTL passed): the turn runs without thinking, no error."""
    client = gateway.openai()
    tool = {
        "type": "function",
        "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}},
    }
    messages: list[Any] = [{"role": "user", "content": f"go [sim:tool=lookup] {time.time_ns()}"}]
    first = await client.chat.completions.create(
        model=MODEL, reasoning_effort="low", tools=[tool], messages=messages
    )
    assert first.choices[0].finish_reason == "tool_calls"
    call = first.choices[0].message.tool_calls[0]  # type: ignore[index]
    redis = aioredis.from_url(gateway.stack.infra.redis_url)  # type: ignore[union-attr]
    try:
        stored = await redis.keys(RedisKeys(PREFIX).thinking("*", call.id))
        assert stored, "the turn's thinking blocks were kept"
        await redis.delete(*stored)
    finally:
        await redis.aclose()
    messages.append(first.choices[0].message.model_dump(exclude_none=True))
    messages.append({"role": "tool", "tool_call_id": call.id, "content": "found it"})
    try:
        second = await client.chat.completions.create(
            model=MODEL, reasoning_effort="low", tools=[tool], messages=messages
        )
    except openai.BadRequestError as exc:  # the deployment refused a tool turn without thinking
        raise AssertionError(f"degraded turn failed: {exc}") from None
    assert second.choices[0].finish_reason == "stop"
    assert second.choices[0].message.content


async def test_responses_stream_sends_ping_comments_during_a_pause(
    gateway: Gateway, http: aiohttp.ClientSession
) -> None:
    body = {"model": MODEL, "stream": True, "store": False, "input": f"slow start {PAUSE}"}
    lines = await raw_lines(http, gateway.url + "/openai/v1/responses", body, gateway.key)
    first_delta = lines.index(b"event: response.output_text.delta\n")
    pings = [i for i, ln in enumerate(lines) if ln == b": ping\n"]
    assert len(pings) >= 2, lines[:8]
    assert pings[0] < first_delta
    assert b"event: response.completed\n" in lines[-4:]
