"""POST /openai/v1/responses through the whole stack with the official openai SDK
(docs/responses.md)."""

from __future__ import annotations

import base64
import json
import re
import uuid
from typing import Any

import openai
import pytest
from pydantic import BaseModel
from support import images
from support.images import PNG

from .conftest import Gateway

MODEL = "Claude-Sonnet-5.5"
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Current weather for a city",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
    "strict": True,
}


async def test_create_returns_a_response_the_sdk_reads(gateway: Gateway) -> None:
    client = gateway.openai()
    raw = await client.responses.with_raw_response.create(
        model=MODEL, input="Say hello.", max_output_tokens=64, store=False
    )
    resp = raw.parse()
    # The id is the request's uid, unique per request (a client may reuse its request id).
    assert re.fullmatch(r"resp_[0-9a-f]{32}", resp.id)
    rid = raw.headers["request-id"]
    assert resp._request_id == rid
    assert resp.object == "response"
    assert resp.status == "completed"
    assert resp.model == MODEL
    assert resp.output_text
    [item] = resp.output
    assert item.type == "message" and item.content[0].type == "output_text"
    assert item.content[0].annotations == []
    assert resp.usage is not None
    assert resp.usage.total_tokens == resp.usage.input_tokens + resp.usage.output_tokens
    row = await gateway.usage_row(rid)
    assert row is not None and row["output_tokens"] == resp.usage.output_tokens


async def test_max_output_tokens_makes_it_incomplete(gateway: Gateway) -> None:
    resp = await gateway.openai().responses.create(
        model=MODEL, input="Talk. [sim:tokens=40]", max_output_tokens=16, store=False
    )
    assert resp.status == "incomplete"
    assert resp.incomplete_details is not None
    assert resp.incomplete_details.reason == "max_output_tokens"


async def test_stream_helper_accumulates_and_the_end_follows_the_record(
    gateway: Gateway,
) -> None:
    client = gateway.openai()
    kinds: list[str] = []
    seqs: list[int] = []
    rid = f"stream-{uuid.uuid4().hex}"
    async with client.responses.stream(
        model=MODEL,
        input="Say hello. [sim:tokens=8]",
        store=False,
        extra_headers={"x-request-id": rid},
    ) as stream:
        async for event in stream:
            kinds.append(event.type)
            seqs.append(event.sequence_number)
            if event.type == "response.completed":
                # response.completed leaves only once the usage row is durable.
                assert await gateway.record_is_durable(rid)
        final = await stream.get_final_response()
    assert kinds[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert kinds.count("response.output_text.delta") == 8
    assert kinds[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert seqs == list(range(len(seqs)))
    assert final.status == "completed" and final.output_text
    assert final.usage is not None and final.usage.output_tokens == 8


class Weather(BaseModel):
    city: str
    celsius: int


async def test_parse_with_a_pydantic_model(gateway: Gateway) -> None:
    resp = await gateway.openai().responses.parse(
        model=MODEL, input="The weather in Oslo?", text_format=Weather, store=False
    )
    assert isinstance(resp.output_parsed, Weather)
    sent = (await gateway.sent_for(resp))["body"]
    assert sent["output_config"]["format"]["type"] == "json_schema"


async def test_a_function_tool_loop_without_state(gateway: Gateway) -> None:
    """Stateless (store false): the client sends the whole conversation back every turn."""
    client = gateway.openai()
    items: list[Any] = [{"role": "user", "content": "Weather in Oslo? [sim:tool=get_weather]"}]
    resp = await client.responses.create(model=MODEL, input=items, tools=[WEATHER], store=False)
    [call] = [o for o in resp.output if o.type == "function_call"]
    assert call.name == "get_weather" and json.loads(call.arguments) == {"city": "Oslo"}
    items += [o.model_dump(exclude_none=True) for o in resp.output]
    items.append({"type": "function_call_output", "call_id": call.call_id, "output": "12 C"})
    resp = await client.responses.create(model=MODEL, input=items, tools=[WEATHER], store=False)
    assert resp.status == "completed" and resp.output_text
    sent = (await gateway.sent_for(resp))["body"]
    tool_result = sent["messages"][-1]["content"][0]
    assert tool_result == {
        "type": "tool_result",
        "tool_use_id": call.call_id,
        "content": "12 C",
        # The automatic breakpoint on the newest turn, as on the chat API.
        "cache_control": {"type": "ephemeral"},
    }


async def test_a_refused_field_is_a_400_naming_it(gateway: Gateway) -> None:
    with pytest.raises(openai.BadRequestError) as err:
        await gateway.openai().responses.create(
            model=MODEL,
            input="hi",
            tools=[{"type": "code_interpreter", "container": {"type": "auto"}}],
            store=False,
        )
    assert err.value.status_code == 400
    body: Any = err.value.body
    assert body["message"].startswith("tools[0].type: the built-in tool code_interpreter")
    assert body["param"] == "tools[0].type"


async def test_a_failure_mid_stream_is_response_failed_and_nothing_is_billed(
    gateway: Gateway,
) -> None:
    client = gateway.openai()
    events: list[Any] = []
    rid = f"failed-{uuid.uuid4().hex}"
    async with client.responses.stream(
        model=MODEL,
        input="Talk. [sim:tokens=10 fail_after=3]",
        store=False,
        extra_headers={"x-request-id": rid},
    ) as stream:
        async for event in stream:
            events.append(event)
    kinds = [e.type for e in events]
    assert kinds.count("response.output_text.delta") == 3
    failed = events[-1]
    assert failed.type == "response.failed"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert failed.response.status == "failed"
    assert failed.response.error is not None and failed.response.error.message
    assert events[0].response.id == failed.response.id
    row = await gateway.usage_row(rid)
    assert row is None or row["cost_micros"] == 0  # as on the chat API: not charged


REFUSED: list[tuple[dict[str, Any], str, str]] = [
    (
        {"tools": [{"type": "web_search_preview", "search_context_size": "huge"}]},
        "tools[0].search_context_size",
        'tools[0].search_context_size: must be "low", "medium" or "high"; got \'huge\'',
    ),
    (
        {"tools": [{"type": "image_generation"}]},
        "tools[0].type",
        "tools[0].type: the built-in tool image_generation is not supported; use function or "
        "custom tools",
    ),
    (
        {"tools": [{"type": "file_search", "vector_store_ids": ["v"]}]},
        "tools[0].type",
        "tools[0].type: the built-in tool file_search is not supported; use function or custom "
        "tools",
    ),
    (
        {"background": True},
        "background",
        "background: background responses are not supported; send false or leave it out",
    ),
    (
        {"truncation": "auto"},
        "truncation",
        'truncation: automatic truncation is not supported; send "disabled" or leave it out',
    ),
    (
        {"conversation": "conv_1"},
        "conversation",
        "conversation: conversations are not supported; send the conversation's items in input",
    ),
    (
        {"text": {"format": {"type": "json_object"}}},
        "text.format.type",
        "text.format.type: json_object is not supported: there is no schema to enforce; use "
        "json_schema",
    ),
    (
        {
            "input": [
                {
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "what is this"},
                        {"type": "input_image", "file_id": "file-1"},
                    ],
                }
            ]
        },
        "input[0].content[1].file_id",
        "input[0].content[1].file_id: file_id is not supported: there is no Files API; send the "
        "image as image_url (a data URL or an http(s) URL)",
    ),
    (
        {"input": [{"role": "tool", "content": "x"}]},
        "input[0].role",
        "input[0].role: must be one of user, assistant, system, developer; got 'tool'",
    ),
]


@pytest.mark.parametrize(("extra", "param", "message"), REFUSED, ids=[r[1] for r in REFUSED])
async def test_refused_fields_name_their_path(
    gateway: Gateway, extra: dict[str, Any], param: str, message: str
) -> None:
    body: dict[str, Any] = {"model": MODEL, "input": "hi", "store": False, **extra}
    with pytest.raises(openai.BadRequestError) as err:
        await gateway.openai().responses.create(**body)
    got: Any = err.value.body
    assert (got["type"], got["param"], got["message"]) == ("invalid_request_error", param, message)


async def test_a_four_turn_tool_loop_keeps_its_thinking_in_sealed_reasoning(
    gateway: Gateway,
) -> None:
    """Stateless with encrypted reasoning (as the Codex CLI runs): each turn's thinking comes
    back sealed in a reasoning item and is restored; the deployment refuses a tool turn whose
    thinking is missing, so four completed turns prove it travelled."""
    client = gateway.openai()
    items: list[Any] = [{"role": "user", "content": "Weather? [sim:tool=get_weather]"}]
    for turn in range(4):
        resp = await client.responses.create(
            model=MODEL,
            input=items,
            tools=[WEATHER],
            reasoning={"effort": "low", "summary": "auto"},
            include=["reasoning.encrypted_content"],
            store=False,
        )
        assert resp.status == "completed"
        reasoning = [o for o in resp.output if o.type == "reasoning"]
        assert reasoning and all(r.encrypted_content for r in reasoning)
        sent = (await gateway.sent_for(resp))["body"]
        thinking = [r["thinking"] for r in _thinking_sent(sent)]
        assert len(thinking) == turn  # every earlier turn's thinking went back upstream
        assert not any(t in (r.encrypted_content or "") for r in reasoning for t in thinking)
        items += [o.model_dump(exclude_none=True) for o in resp.output]
        calls = [o for o in resp.output if o.type == "function_call"]
        if turn == 3:
            assert not calls and resp.output_text
            break
        [call] = calls
        again = "[sim:tool=get_weather]" if turn < 2 else "done"
        items.append(
            {"type": "function_call_output", "call_id": call.call_id, "output": f"9 C {again}"}
        )


def _thinking_sent(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        block
        for message in body["messages"]
        if message["role"] == "assistant" and isinstance(message["content"], list)
        for block in message["content"]
        if block["type"] == "thinking"
    ]


async def test_a_tampered_or_foreign_reasoning_item_is_a_400_naming_it(
    gateway: Gateway, new_key: Any
) -> None:
    client = gateway.openai()
    first: list[Any] = [{"role": "user", "content": "Weather? [sim:tool=get_weather]"}]
    resp = await client.responses.create(
        model=MODEL,
        input=first,
        tools=[WEATHER],
        reasoning={"effort": "low"},
        include=["reasoning.encrypted_content"],
        store=False,
    )
    out = [o.model_dump(exclude_none=True) for o in resp.output]
    [call] = [o for o in resp.output if o.type == "function_call"]
    result = {"type": "function_call_output", "call_id": call.call_id, "output": "9 C"}
    index = 1 + next(i for i, o in enumerate(out) if o["type"] == "reasoning")
    tampered = [dict(o) for o in out]
    blob = tampered[index - 1]["encrypted_content"]
    tampered[index - 1]["encrypted_content"] = blob[:-4] + (
        "AAAA" if blob[-4:] != "AAAA" else "BBBB"
    )
    other = gateway.openai(api_key=await new_key("other-tenant"))
    expected = (
        f"input[{index}].encrypted_content: the reasoning item was not sealed by this gateway for "
        "this API key, or was altered; send it back unchanged or leave it out"
    )
    for sender, items in ((client, [*first, *tampered, result]), (other, [*first, *out, result])):
        with pytest.raises(openai.BadRequestError) as err:
            await sender.responses.create(
                model=MODEL, input=items, tools=[WEATHER], reasoning={"effort": "low"}, store=False
            )
        body: Any = err.value.body
        assert (body["param"], body["message"]) == (f"input[{index}].encrypted_content", expected)


async def test_images_by_data_url_and_http_url_and_a_pdf(gateway: Gateway) -> None:
    data_url = "data:image/png;base64," + base64.b64encode(PNG).decode()
    pdf = "data:application/pdf;base64," + base64.b64encode(b"%PDF-1.4 test").decode()
    client = gateway.openai()
    async with images.serving() as server:
        resp = await client.responses.create(
            model=MODEL,
            store=False,
            input=[
                {
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "What is in these?"},
                        {"type": "input_image", "image_url": data_url, "detail": "auto"},
                        {"type": "input_image", "image_url": f"{server}/photo.png"},
                        {"type": "input_file", "filename": "a.pdf", "file_data": pdf},
                    ],
                }
            ],
        )
        blocks = (await gateway.sent_for(resp))["body"]["messages"]
        sent = [b for b in blocks[0]["content"] if b["type"] in ("image", "document")]
        assert [b["type"] for b in sent] == ["image", "image", "document"]
        for block in sent[:2]:
            assert block["source"]["media_type"] == "image/png"
            assert base64.b64decode(block["source"]["data"]) == PNG
        with pytest.raises(openai.BadRequestError) as err:
            await client.responses.create(
                model=MODEL,
                store=False,
                input=[
                    {
                        "role": "user",
                        "content": [
                            {"type": "input_text", "text": "x"},
                            {"type": "input_image", "image_url": f"{server}/missing.png"},
                        ],
                    }
                ],
            )
    body: Any = err.value.body
    assert body["message"] == (
        "input[0].content[1].image_url: could not download the image (HTTP 404)"
    )


async def test_an_overloaded_deployment_is_a_503_in_openais_envelope(gateway: Gateway) -> None:
    with pytest.raises(openai.InternalServerError) as err:
        await gateway.openai().responses.create(
            model=MODEL, input="hi [sim:status=529]", store=False
        )
    assert err.value.status_code == 503
    body: Any = err.value.body
    assert set(body) >= {"message", "type", "param", "code"} and body["message"]


async def test_a_custom_tools_call_and_its_output_round_trip(gateway: Gateway) -> None:
    client = gateway.openai()
    patch = {"type": "custom", "name": "apply_patch", "description": "Applies a patch"}
    items: list[Any] = [{"role": "user", "content": "Fix it. [sim:tool=apply_patch arg=PATCH]"}]
    resp = await client.responses.create(model=MODEL, input=items, tools=[patch], store=False)
    [call] = resp.output
    assert call.type == "custom_tool_call"
    assert (call.name, call.input) == ("apply_patch", "PATCH")
    items += [call.model_dump(exclude_none=True)]
    items.append({"type": "custom_tool_call_output", "call_id": call.call_id, "output": "done"})
    resp = await client.responses.create(model=MODEL, input=items, tools=[patch], store=False)
    assert resp.status == "completed" and resp.output_text
