"""POST /v1/messages/count_tokens: free, not billed, anthropic-beta not passed on."""

from __future__ import annotations

import pytest

from .conftest import Gateway

MODEL = "anthropic/claude-sonnet-5-5"


async def test_count_tokens_with_sdk_and_no_usage_row(gateway: Gateway) -> None:
    client = gateway.anthropic()
    raw = await client.messages.with_raw_response.count_tokens(
        model="Claude-Sonnet-5-5",
        system="You are a concise assistant.",
        messages=[{"role": "user", "content": "Hello, what can you do?"}],
    )
    counted = await raw.parse()
    assert counted.input_tokens > 0
    assert await gateway.usage_row(raw.headers["request-id"], wait=1.0) is None


async def test_max_tokens_and_stream_are_ignored_and_beta_not_passed(
    gateway: Gateway, http
) -> None:  # type: ignore[no-untyped-def]
    body = {
        "model": MODEL,
        "max_tokens": "not even a number",
        "stream": True,
        "messages": [{"role": "user", "content": "count me"}],
    }
    headers = {
        "x-api-key": gateway.key,
        "anthropic-beta": "some-beta-2025",
        "x-request-id": "count-beta-1",
    }
    async with http.post(
        gateway.url + "/v1/messages/count_tokens", json=body, headers=headers
    ) as resp:
        assert resp.status == 200
        assert resp.content_type == "application/json"
        data = await resp.json()
    assert isinstance(data["input_tokens"], int)
    seen = await gateway.sim_requests(gateway.sim_a) + await gateway.sim_requests(gateway.sim_b)
    sent = next(r for r in seen if r["headers"].get("x-request-id") == "count-beta-1")
    assert sent["path"].endswith("/count_tokens")
    assert "anthropic-beta" not in sent["headers"]
    assert "max_tokens" not in sent["body"]
    assert "stream" not in sent["body"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"messages": [{"role": "user", "content": "x"}]}, "model"),
        ({"model": MODEL}, "messages"),
        ({"model": MODEL, "messages": []}, "messages"),
    ],
)
async def test_count_tokens_requires_model_and_messages(
    gateway: Gateway, http, body, field
) -> None:  # type: ignore[no-untyped-def]
    async with http.post(
        gateway.url + "/v1/messages/count_tokens", json=body, headers={"x-api-key": gateway.key}
    ) as resp:
        assert resp.status == 400
        data = await resp.json()
    assert data["error"]["message"].startswith(field + ":")
