"""Cost in the answer: the final usage of every answer carries ``cost_usd``, equal to its stored
row's cost, and JSON answers an ``x-ezat-cost-usd`` header; the official SDKs parse every answer
as before (docs/billing.md, "Cost in the answer"). Both APIs, streamed and not, and the Responses
API; the row read with SQL and through ``/api/usage``."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from .conftest import Gateway

MODEL = "Claude-Sonnet-5.5"


@pytest.fixture
async def key(new_key: Any) -> str:
    return str(await new_key("cost-in-answer"))


async def assert_row_cost(
    gateway: Gateway, http: aiohttp.ClientSession, key: str, rid: str, cost_usd: Any
) -> None:
    """``cost_usd`` (from the answer, as the SDK parsed it) is the stored row's cost: its
    ``cost_micros`` / 10^6, and its ``cost_usd`` in ``/api/usage``."""
    assert isinstance(cost_usd, float), cost_usd
    row = await gateway.usage_row(rid)
    assert row is not None and row["status"] == "complete"
    assert row["cost_micros"] > 0
    assert cost_usd == row["cost_micros"] / 1_000_000
    async with http.get(f"{gateway.url}/api/usage?limit=50", headers={"x-api-key": key}) as r:
        assert r.status == 200
        page = await r.json()
    [item] = [i for i in page["data"] if i["request_id"] == rid]
    assert item["cost_usd"] == cost_usd


def header_cost(headers: Any) -> float:
    text = headers["x-ezat-cost-usd"]
    assert "e" not in text.lower(), text  # a plain decimal, e.g. 0.000123
    return float(text)


async def test_anthropic_json(gateway: Gateway, http: aiohttp.ClientSession, key: str) -> None:
    async with gateway.anthropic(api_key=key) as client:
        raw = await client.messages.with_raw_response.create(
            model=MODEL,
            max_tokens=32,
            messages=[{"role": "user", "content": "what does it cost [sim:tokens=7]"}],
        )
        message = await raw.parse()
    assert message.usage.output_tokens == 7  # the SDK parsed the rest as ever
    extra = message.usage.model_extra or {}
    cost = getattr(message.usage, "cost_usd", None)
    assert cost == extra["cost_usd"] == header_cost(raw.headers)
    await assert_row_cost(gateway, http, key, raw.headers["request-id"], cost)


async def test_anthropic_stream(gateway: Gateway, http: aiohttp.ClientSession, key: str) -> None:
    costs: list[Any] = []
    async with (
        gateway.anthropic(api_key=key) as client,
        client.messages.stream(
            model=MODEL,
            max_tokens=32,
            messages=[{"role": "user", "content": "stream the cost [sim:tokens=5]"}],
        ) as stream,
    ):
        rid = stream.response.headers["request-id"]
        async for event in stream:
            if event.type == "message_delta":
                costs.append(getattr(event.usage, "cost_usd", None))
        final = await stream.get_final_message()
    assert final.usage.output_tokens == 5 and final.stop_reason == "end_turn"
    [cost] = costs
    await assert_row_cost(gateway, http, key, rid, cost)


async def test_chat_json(gateway: Gateway, http: aiohttp.ClientSession, key: str) -> None:
    async with gateway.openai(api_key=key) as client:
        raw = await client.chat.completions.with_raw_response.create(
            model=MODEL,
            max_tokens=32,
            messages=[{"role": "user", "content": "chat cost [sim:tokens=6]"}],
        )
        completion = raw.parse()
    assert completion.usage is not None and completion.usage.completion_tokens == 6
    cost = getattr(completion.usage, "cost_usd", None)
    assert cost == (completion.usage.model_extra or {})["cost_usd"] == header_cost(raw.headers)
    await assert_row_cost(gateway, http, key, raw.headers["x-request-id"], cost)


async def test_chat_stream_usage_chunk(
    gateway: Gateway, http: aiohttp.ClientSession, key: str
) -> None:
    async with gateway.openai(api_key=key) as client:
        raw = await client.chat.completions.with_raw_response.create(
            model=MODEL,
            max_tokens=32,
            stream=True,
            stream_options={"include_usage": True},
            messages=[{"role": "user", "content": "chat stream cost [sim:tokens=4]"}],
        )
        stream = raw.parse()
        chunks = [chunk async for chunk in stream]
    usages = [c.usage for c in chunks if c.usage is not None]
    [usage] = usages  # only the final chunk carries usage
    assert chunks[-1].usage is usage and usage.completion_tokens == 4
    await assert_row_cost(
        gateway, http, key, raw.headers["x-request-id"], getattr(usage, "cost_usd", None)
    )


async def test_responses_json(gateway: Gateway, http: aiohttp.ClientSession, key: str) -> None:
    async with gateway.openai(api_key=key) as client:
        raw = await client.responses.with_raw_response.create(
            model=MODEL, input="responses cost [sim:tokens=3]", max_output_tokens=32
        )
        response = raw.parse()
    assert response.usage is not None and response.usage.output_tokens == 3
    cost = getattr(response.usage, "cost_usd", None)
    assert cost == header_cost(raw.headers)
    await assert_row_cost(gateway, http, key, raw.headers["x-request-id"], cost)


async def test_responses_stream_completed(
    gateway: Gateway, http: aiohttp.ClientSession, key: str
) -> None:
    async with gateway.openai(api_key=key) as client:
        raw = await client.responses.with_raw_response.create(
            model=MODEL,
            input="responses stream cost [sim:tokens=5]",
            max_output_tokens=32,
            stream=True,
        )
        stream = raw.parse()
        events = [event async for event in stream]
    completed = [e for e in events if e.type == "response.completed"]
    [done] = completed
    usage = done.response.usage
    assert usage is not None and usage.output_tokens == 5
    await assert_row_cost(
        gateway, http, key, raw.headers["x-request-id"], getattr(usage, "cost_usd", None)
    )
