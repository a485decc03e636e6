"""count_tokens where a deployment cannot count (docs/api.md, "count_tokens"; docs/routing.md,
"Counting"), through the real stack with the official ``anthropic`` SDK: Bedrock's CountTokens
refuses the inference profile ``PROFILE_ID`` (the simulator as Bedrock does), so the model's
other deployment counts, or else the translator's estimate answers and says so; the refusal
leaves the deployment healthy; a ``count_tokens = "estimate"`` deployment is never asked."""

from __future__ import annotations

import uuid
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from .conftest import PROFILE_ID, Kinds

COUNT_PATH = f"/model/{PROFILE_ID}/count-tokens"
TOOL = {
    "name": "get_weather",
    "description": "The weather in a city, today or on a date",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "date": {"type": "string"}},
        "required": ["city"],
    },
}
# Every part the estimate reads: system, tools, text, a tool call and its result.
BODY: dict[str, Any] = {
    "system": "You answer questions about the weather, briefly and politely.",
    "tools": [TOOL],
    "messages": [
        {"role": "user", "content": "What is the weather in Lisbon tomorrow? 明日の天気は?"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me look it up."},
                {
                    "type": "tool_use",
                    "id": "t1",
                    "name": "get_weather",
                    "input": {"city": "Lisbon"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "Sunny, 24 degrees"},
                {"type": "text", "text": "Thanks. And should I bring an umbrella?"},
            ],
        },
    ],
}


def _rid() -> str:
    return f"count-{uuid.uuid4().hex[:16]}"


async def _count(gw: Kinds, model: str, rid: str | None = None) -> tuple[int, dict[str, str]]:
    """The count and the reply's headers, lower-case."""
    raw = await gw.anthropic().messages.with_raw_response.count_tokens(
        model=model, extra_headers={"x-request-id": rid or _rid()}, **BODY
    )
    return (await raw.parse()).input_tokens, {k.lower(): v for k, v in raw.headers.items()}


async def _asked(gw: Kinds, face: str, rid: str) -> list[str]:
    """The paths ``face`` was asked for under request id ``rid``."""
    log = await gw.received(face, 100)
    return [r["path"] for r in log if r["headers"].get("x-request-id") == rid]


async def test_a_pool_that_cannot_count_answers_the_estimate_and_says_so(gw: Kinds) -> None:
    exact, exact_headers = await _count(gw, "anthropic-only")
    assert exact_headers["x-ezat-token-count"] == "upstream"
    assert exact_headers["x-ezat-deployment"] == "only-anthropic"
    for _ in range(2):  # the refusal, then the remembered one (not asked again)
        rid = _rid()
        estimate, headers = await _count(gw, "bedrock-nocount", rid)
        assert headers["x-ezat-token-count"] == "estimate"
        assert "x-ezat-deployment" not in headers  # no deployment counted
        assert estimate >= exact > 0
    assert await _asked(gw, "bedrock", rid) == []  # the second: Bedrock was not asked again


async def test_a_deployment_that_can_count_is_preferred_to_the_estimate(gw: Kinds) -> None:
    exact, _ = await _count(gw, "anthropic-only")
    refused_at = None
    for i in range(30):  # until the least-loaded order puts the Bedrock deployment first once
        rid = _rid()
        counted, headers = await _count(gw, "count-fallback", rid)
        assert (counted, headers["x-ezat-token-count"]) == (exact, "upstream")
        assert headers["x-ezat-deployment"] == "fallback-anthropic"
        if refused_at is None and await _asked(gw, "bedrock", rid) == [COUNT_PATH]:
            refused_at = i
    assert refused_at is not None, "the Bedrock deployment was never tried first"


async def test_a_refusal_to_count_leaves_the_deployment_healthy(gw: Kinds) -> None:
    _, headers = await _count(gw, "bedrock-nocount")
    assert headers["x-ezat-token-count"] == "estimate"
    rid = _rid()
    raw = await gw.anthropic().messages.with_raw_response.create(
        model="bedrock-nocount",
        max_tokens=16,
        messages=[{"role": "user", "content": "hi"}],
        extra_headers={"x-request-id": rid},
    )
    assert (await raw.parse()).content and raw.headers["x-ezat-deployment"] == "nocount"
    assert await _asked(gw, "bedrock", rid) == [f"/model/{PROFILE_ID}/invoke"]
    async with aiohttp.ClientSession() as s, s.get(gw.metrics_url) as r:
        families = {f.name: f for f in text_string_to_metric_families(await r.text())}
    health = {
        (family, s.labels["deployment"]): s.value
        for family in ("ezat_router_deployment_up", "ezat_router_breaker_open")
        for s in families[family].samples
    }
    assert health[("ezat_router_deployment_up", "nocount")] == 1.0
    assert health[("ezat_router_breaker_open", "nocount")] == 0.0


async def test_an_estimate_deployment_is_never_asked_to_count(gw: Kinds) -> None:
    rid = _rid()
    estimate, headers = await _count(gw, "count-estimate", rid)
    assert headers["x-ezat-token-count"] == "estimate" and estimate > 0
    assert "x-ezat-deployment" not in headers
    assert await _asked(gw, "anthropic", rid) == []
