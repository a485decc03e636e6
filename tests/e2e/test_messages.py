"""POST /v1/messages through the whole stack with the official anthropic SDK."""

from __future__ import annotations

import base64
import time
from typing import Any

import anthropic
import pytest
from support import images
from support.images import PNG

from .conftest import Gateway

MODEL = "anthropic/claude-sonnet-5-5"


async def test_non_stream_text(gateway: Gateway) -> None:
    client = gateway.anthropic()
    raw = await client.messages.with_raw_response.create(
        model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "Hello [sim:tokens=7]"}]
    )
    message = await raw.parse()
    assert message.model == MODEL
    assert message.stop_reason == "end_turn"
    assert message.content[0].type == "text"
    assert len(message.content[0].text) == 7 * 4
    assert message.usage.output_tokens == 7
    assert message.usage.input_tokens > 0
    rid = raw.headers["request-id"]
    assert raw.headers["x-request-id"] == rid


async def test_stream_text_token_by_token(gateway: Gateway) -> None:
    client = gateway.anthropic()
    deltas: list[str] = []
    types: list[str] = []
    async with client.messages.stream(
        model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "Hi [sim:tokens=9]"}]
    ) as stream:
        async for event in stream:
            types.append(event.type)
            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                deltas.append(event.delta.text)
        final = await stream.get_final_message()
    assert len(deltas) == 9
    assert all(len(d) == 4 for d in deltas)
    assert types[0] == "message_start"
    assert types[-1] == "message_stop"
    assert final.model == MODEL
    assert final.usage.output_tokens == 9
    assert "".join(deltas) == final.content[0].text


async def test_stream_thinking_then_text(gateway: Gateway) -> None:
    client = gateway.anthropic()
    async with client.messages.stream(
        model=MODEL,
        max_tokens=2000,
        thinking={"type": "enabled", "budget_tokens": 1024},
        messages=[{"role": "user", "content": "Think first [sim:tokens=5]"}],
    ) as stream:
        final = await stream.get_final_message()
    kinds = [b.type for b in final.content]
    assert kinds == ["thinking", "text"]
    assert final.content[0].thinking
    assert final.content[0].signature


async def test_stream_tool_use(gateway: Gateway) -> None:
    client = gateway.anthropic()
    tools = [
        {
            "name": "get_weather",
            "description": "Current weather for a city",
            "input_schema": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        }
    ]
    async with client.messages.stream(
        model=MODEL,
        max_tokens=200,
        tools=tools,
        tool_choice={"type": "any"},
        messages=[{"role": "user", "content": "Weather in Oslo?"}],
    ) as stream:
        final = await stream.get_final_message()
    assert final.stop_reason == "tool_use"
    tool = next(b for b in final.content if b.type == "tool_use")
    assert tool.name == "get_weather"
    assert tool.input == {"city": "Oslo"}


async def test_non_stream_tool_use(gateway: Gateway) -> None:
    client = gateway.anthropic()
    message = await client.messages.create(
        model=MODEL,
        max_tokens=200,
        tools=[{"name": "lookup", "input_schema": {"type": "object", "properties": {}}}],
        messages=[{"role": "user", "content": "Call it [sim:tool=lookup]"}],
    )
    assert message.stop_reason == "tool_use"
    assert message.content[-1].type == "tool_use"
    assert message.content[-1].name == "lookup"


@pytest.mark.parametrize(
    "name",
    [
        "anthropic/claude-sonnet-5-5",
        "claude-sonnet-5-5",
        "CLAUDE-SONNET-5.5",
        "  claude-Sonnet-5-5 ",
    ],
)
async def test_aliases_and_case_resolve_and_model_is_echoed(gateway: Gateway, name: str) -> None:
    client = gateway.anthropic()
    message = await client.messages.create(
        model=name, max_tokens=16, messages=[{"role": "user", "content": "hi"}]
    )
    assert message.model == name
    async with client.messages.stream(
        model=name, max_tokens=16, messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        final = await stream.get_final_message()
    assert final.model == name


async def test_upstream_receives_its_own_model_name_and_key(gateway: Gateway) -> None:
    client = gateway.anthropic()
    await client.messages.create(
        model="claude-sonnet-5.5",
        max_tokens=16,
        messages=[{"role": "user", "content": "which name [sim:tokens=2]"}],
        extra_headers={"x-request-id": "upstream-name-check-1"},
    )
    seen = await gateway.sim_requests(gateway.sim_a) + await gateway.sim_requests(gateway.sim_b)
    mine = [r for r in seen if r["headers"].get("x-request-id") == "upstream-name-check-1"]
    assert len(mine) == 1
    assert mine[0]["body"]["model"] == "claude-sonnet-5-5"
    assert mine[0]["headers"]["x-api-key"] == "sim-key"
    assert gateway.key not in str(mine[0]["headers"])


async def test_other_fields_pass_through_unchanged(gateway: Gateway) -> None:
    client = gateway.anthropic()
    await client.messages.create(
        model=MODEL,
        max_tokens=16,
        system=[{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        metadata={"user_id": "u-42"},
        stop_sequences=["END"],
        messages=[{"role": "user", "content": "pass through"}],
        extra_headers={"x-request-id": "passthrough-1", "anthropic-beta": "beta-x"},
    )
    seen = await gateway.sim_requests(gateway.sim_a) + await gateway.sim_requests(gateway.sim_b)
    body = next(r for r in seen if r["headers"].get("x-request-id") == "passthrough-1")
    assert body["body"]["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert body["body"]["metadata"] == {"user_id": "u-42"}
    assert body["body"]["stop_sequences"] == ["END"]
    assert body["headers"]["anthropic-beta"] == "beta-x"


async def test_cache_control_removed_for_models_without_prompt_caching(gateway: Gateway) -> None:
    client = gateway.anthropic()
    await client.messages.create(
        model="claude-instant",
        max_tokens=16,
        system=[{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}],
        tools=[
            {
                "name": "t",
                "input_schema": {"type": "object"},
                "cache_control": {"type": "ephemeral"},
            }
        ],
        messages=[
            {
                "role": "user",
                "content": [
                    {
                        "type": "text",
                        "text": "x",
                        "cache_control": {"type": "ephemeral", "ttl": "1h"},
                    }
                ],
            }
        ],
        extra_headers={"x-request-id": "nocache-1"},
    )
    seen = await gateway.sim_requests(gateway.sim_b)
    sent = next(r for r in seen if r["headers"].get("x-request-id") == "nocache-1")
    assert "cache_control" not in str(sent["body"])
    assert sent["body"]["system"][0]["text"] == "sys"


async def test_first_event_arrives_before_the_simulator_finishes(gateway: Gateway) -> None:
    """No buffering: 20 tokens at 100 ms each; the first text must arrive long before the end."""
    client = gateway.anthropic()
    started = time.monotonic()
    first_text_at = None
    async with client.messages.stream(
        model=MODEL,
        max_tokens=64,
        messages=[{"role": "user", "content": "slow [sim:tokens=20] [sim:token_ms=100]"}],
    ) as stream:
        async for event in stream:
            if event.type == "content_block_delta" and first_text_at is None:
                first_text_at = time.monotonic() - started
        total = time.monotonic() - started
    assert first_text_at is not None
    assert total >= 1.9
    assert first_text_at < total - 1.0


async def test_anthropic_version_header_is_optional(gateway: Gateway, http) -> None:  # type: ignore[no-untyped-def]
    body = {"model": MODEL, "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}
    async with http.post(
        gateway.url + "/v1/messages", json=body, headers={"x-api-key": gateway.key}
    ) as resp:
        assert resp.status == 200
        data = await resp.json()
    assert data["type"] == "message"


async def test_bearer_authorization_is_accepted(gateway: Gateway, http) -> None:  # type: ignore[no-untyped-def]
    body = {"model": MODEL, "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}
    async with http.post(
        gateway.url + "/v1/messages",
        json=body,
        headers={"authorization": f"Bearer {gateway.key}"},
    ) as resp:
        assert resp.status == 200


async def test_sdk_error_class_for_unknown_model(gateway: Gateway) -> None:
    client = gateway.anthropic()
    with pytest.raises(anthropic.NotFoundError) as info:
        await client.messages.create(
            model="gpt-9", max_tokens=8, messages=[{"role": "user", "content": "hi"}]
        )
    assert info.value.status_code == 404
    body = info.value.body
    assert isinstance(body, dict)
    assert body["error"]["type"] == "not_found_error"
    assert body["error"]["message"] == (
        "The model `gpt-9` does not exist or you do not have access to it. "
        "GET /v1/models lists the models you can use."
    )
    assert body["request_id"] == info.value.response.headers["request-id"]


async def test_stream_with_an_image_url_downloaded_for_the_deployment(gateway: Gateway) -> None:
    """The Messages API's image URLs are downloaded (through the fetcher, off the translator's
    subscription) and sent inline; a URL that cannot be fetched is a 400 naming it."""
    client = gateway.anthropic()
    rid = f"msg-image-{time.time_ns()}"
    async with images.serving() as server:
        picture: Any = {"type": "image", "source": {"type": "url", "url": f"{server}/photo.png"}}
        content: Any = [picture, {"type": "text", "text": "what is it? [sim:tokens=3]"}]
        async with client.messages.stream(
            model=MODEL,
            max_tokens=16,
            messages=[{"role": "user", "content": content}],
            extra_headers={"x-request-id": rid},
        ) as stream:
            final = await stream.get_final_message()
        assert final.usage.output_tokens == 3
        block = (await gateway.sent_upstream(rid))["body"]["messages"][0]["content"][0]
        assert block["type"] == "image" and block["source"]["type"] == "base64"
        assert base64.b64decode(block["source"]["data"]) == PNG

        missing: Any = {"type": "image", "source": {"type": "url", "url": f"{server}/no.png"}}
        with pytest.raises(anthropic.BadRequestError) as info:
            await client.messages.create(
                model=MODEL, max_tokens=16, messages=[{"role": "user", "content": [missing]}]
            )
    assert info.value.body["error"]["message"] == (  # type: ignore[index]
        "messages[0].content[0].source.url: could not download the image (HTTP 404)"
    )
