"""POST /openai/v1/chat/completions through the whole stack with the official openai SDK."""

from __future__ import annotations

import base64
import time
from typing import Any

import aiohttp
import msgspec
import openai
import pytest
from support import images
from support.images import PNG

from .conftest import Gateway

MODEL = "anthropic/claude-sonnet-5-5"
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


def rid_header(rid: str) -> dict[str, str]:
    return {"x-request-id": rid}


async def sse_lines(
    http: aiohttp.ClientSession, gateway: Gateway, body: dict[str, Any], rid: str
) -> list[str]:
    headers = {"authorization": f"Bearer {gateway.key}", "x-request-id": rid}
    lines: list[str] = []
    async with http.post(
        gateway.url + "/openai/v1/chat/completions", json=body, headers=headers
    ) as resp:
        assert resp.status == 200, await resp.text()
        async for raw in resp.content:
            line = raw.decode().rstrip("\n")
            if line:
                lines.append(line)
            if line == "data: [DONE]":
                # [DONE] is released only after billing made the row durable.
                lines.append(f"row:{await gateway.record_is_durable(rid)}")
    return lines


async def test_non_stream_response_shape(gateway: Gateway) -> None:
    client = gateway.openai()
    raw = await client.chat.completions.with_raw_response.create(
        model="Claude-Sonnet-5.5",
        max_completion_tokens=64,
        messages=[
            {"role": "system", "content": "Answer in one sentence."},
            {"role": "user", "content": "What is a prompt cache? [sim:tokens=5]"},
        ],
    )
    completion = raw.parse()
    rid = raw.headers["request-id"]
    assert completion.id == f"chatcmpl-{rid}"
    assert completion.object == "chat.completion"
    assert completion.model == "Claude-Sonnet-5.5"
    assert len(completion.choices) == 1
    choice = completion.choices[0]
    assert choice.index == 0
    assert choice.finish_reason == "stop"
    assert choice.logprobs is None
    assert choice.message.role == "assistant"
    assert choice.message.refusal is None
    assert len(choice.message.content or "") == 20
    usage = completion.usage
    assert usage is not None
    assert usage.completion_tokens == 5
    assert usage.total_tokens == usage.prompt_tokens + 5
    row = await gateway.usage_row(rid)
    assert row is not None
    assert usage.prompt_tokens == (
        row["input_tokens"]
        + row["cache_read_tokens"]
        + row["cache_write_5m_tokens"]
        + row["cache_write_1h_tokens"]
    )


async def test_stream_sequence_with_usage(gateway: Gateway, http: aiohttp.ClientSession) -> None:
    body = {
        "model": MODEL,
        "max_tokens": 64,
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": "Count [sim:tokens=4]"}],
    }
    rid = f"oa-stream-{time.time_ns()}"
    lines = await sse_lines(http, gateway, body, rid)
    assert lines[-2:] == ["data: [DONE]", "row:True"]
    chunks = [msgspec.json.decode(line[6:]) for line in lines[:-2] if line.startswith("data: ")]
    assert all(
        c["id"] == f"chatcmpl-{rid}" and c["object"] == "chat.completion.chunk" for c in chunks
    )
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    texts = [c["choices"][0]["delta"].get("content") for c in chunks[1:-2]]
    assert len(texts) == 4 and all(len(t) == 4 for t in texts)
    last_choice = chunks[-2]["choices"][0]
    assert last_choice["delta"] == {}
    assert last_choice["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"]["completion_tokens"] == 4


async def test_stream_without_include_usage_has_no_usage_chunk(
    gateway: Gateway, http: aiohttp.ClientSession
) -> None:
    body = {
        "model": MODEL,
        "max_tokens": 64,
        "stream": True,
        "messages": [{"role": "user", "content": "Count [sim:tokens=3]"}],
    }
    lines = await sse_lines(http, gateway, body, f"oa-nousage-{time.time_ns()}")
    chunks = [msgspec.json.decode(line[6:]) for line in lines[:-2]]
    assert all(c["choices"] for c in chunks)
    assert not any(c.get("usage") for c in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


async def test_stream_tool_calls_arrive_by_index(gateway: Gateway) -> None:
    client = gateway.openai()
    stream = await client.chat.completions.create(
        model=MODEL,
        max_tokens=200,
        stream=True,
        tools=[WEATHER_TOOL],
        tool_choice="required",
        messages=[{"role": "user", "content": "weather?"}],
    )
    pieces: list[Any] = []
    finish = None
    async for chunk in stream:
        if chunk.choices:
            delta = chunk.choices[0].delta
            if delta.tool_calls:
                pieces.extend(delta.tool_calls)
            finish = chunk.choices[0].finish_reason or finish
    assert finish == "tool_calls"
    first = pieces[0]
    assert first.index == 0 and first.id and first.type == "function"
    assert first.function.name == "get_weather"
    assert first.function.arguments == ""
    args = "".join(p.function.arguments or "" for p in pieces[1:])
    assert all(p.id is None for p in pieces[1:])
    assert msgspec.json.decode(args) == {"city": "Oslo"}


async def test_tool_loop_with_reasoning_effort_over_several_turns(gateway: Gateway) -> None:
    """The model needs its thinking blocks back on each tool turn; clients never see them."""
    client = gateway.openai()
    messages: list[Any] = [{"role": "user", "content": "Plan a trip [sim:tool=get_weather]"}]
    for turn in range(4):
        completion = await client.chat.completions.create(
            model=MODEL,
            max_completion_tokens=4000,
            reasoning_effort="high",
            tools=[WEATHER_TOOL],
            messages=messages,
        )
        message = completion.choices[0].message
        assert completion.usage is not None
        assert completion.usage.completion_tokens_details is not None
        assert completion.usage.completion_tokens_details.reasoning_tokens > 0
        assert "thinking" not in str(message.model_dump()).lower()
        if turn == 3:
            assert completion.choices[0].finish_reason == "stop"
            assert message.content
            break
        assert completion.choices[0].finish_reason == "tool_calls"
        messages.append(message.model_dump(exclude_none=True))
        call = message.tool_calls[0]  # type: ignore[index]
        again = "[sim:tool=get_weather]" if turn < 2 else "done"
        messages.append({"role": "tool", "tool_call_id": call.id, "content": f"9°C {again}"})


async def test_mid_stream_failure_is_an_error_chunk_then_done_and_not_billed(
    gateway: Gateway, http: aiohttp.ClientSession
) -> None:
    body = {
        "model": MODEL,
        "max_tokens": 64,
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": "x [sim:tokens=10] [sim:fail_after=2]"}],
    }
    rid = f"oa-fail-{time.time_ns()}"
    lines = await sse_lines(http, gateway, body, rid)
    assert lines[-2] == "data: [DONE]"
    error = msgspec.json.decode(lines[-3][6:])
    assert set(error) == {"error"}
    assert error["error"]["message"]
    chunks = [msgspec.json.decode(line[6:]) for line in lines[:-3] if line.startswith("data: ")]
    assert not any(c.get("usage") for c in chunks)  # no usage chunk after a failure
    row = await gateway.usage_row(rid)
    assert row is None or row["cost_micros"] == 0


REFUSED = [
    ({"n": 2}, "n"),
    ({"logprobs": True}, "logprobs"),
    ({"top_logprobs": 2}, "top_logprobs"),
    ({"logit_bias": {"50256": -100}}, "logit_bias"),
    ({"modalities": ["text", "audio"]}, "modalities"),
    ({"audio": {"voice": "alloy", "format": "wav"}}, "audio"),
    (
        {"web_search_options": {"search_context_size": "max"}},
        "web_search_options.search_context_size",
    ),
    ({"functions": [{"name": "f", "parameters": {}}]}, "functions"),
    ({"function_call": "auto"}, "function_call"),
    ({"response_format": {"type": "json_object"}}, "response_format.type"),
    ({"reasoning_effort": "extreme"}, "reasoning_effort"),
    ({"prompt_cache_key": "k" * 257}, "prompt_cache_key"),
]


@pytest.mark.parametrize(("extra", "param"), REFUSED, ids=[p for _, p in REFUSED])
async def test_refused_fields_are_400_naming_the_field(
    gateway: Gateway, extra: dict[str, Any], param: str
) -> None:
    client = gateway.openai()
    with pytest.raises(openai.BadRequestError) as info:
        await client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "hi"}],
            extra_body=extra,
        )
    body = info.value.body
    assert isinstance(body, dict)
    assert body["type"] == "invalid_request_error"
    assert body["param"] == param
    assert body["message"].startswith(param + ":")


@pytest.mark.parametrize(
    ("message", "param"),
    [
        (
            {
                "role": "user",
                "content": [
                    {"type": "input_audio", "input_audio": {"data": "AA==", "format": "wav"}}
                ],
            },
            "messages[0].content[0].input_audio",
        ),
        ({"role": "function", "name": "f", "content": "x"}, "messages[0].role"),
        (
            {"role": "user", "content": [{"type": "file", "file": {"file_id": "file-1"}}]},
            "messages[0].content[0].file.file_id",
        ),
        (
            {
                "role": "user",
                "content": [
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,/9j/4AAQ"}}
                ],
            },
            "messages[0].content[0].image_url.url",
        ),
    ],
)
async def test_refused_parts_name_their_path(
    gateway: Gateway, message: dict[str, Any], param: str
) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        await gateway.openai().chat.completions.create(model=MODEL, messages=[message])
    assert info.value.body["message"].startswith(param + ":")  # type: ignore[index]


async def test_accepted_no_op_values(gateway: Gateway) -> None:
    completion = await gateway.openai().chat.completions.create(
        model=MODEL, n=1, logprobs=False, messages=[{"role": "user", "content": "ok"}]
    )
    assert len(completion.choices) == 1


async def test_system_only_is_refused_with_the_seed_message(gateway: Gateway) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        await gateway.openai().chat.completions.create(
            model=MODEL, messages=[{"role": "system", "content": "only me"}]
        )
    assert info.value.body["message"] == "messages: must contain at least one user message"  # type: ignore[index]


async def test_unknown_model_is_404_model_not_found(gateway: Gateway) -> None:
    with pytest.raises(openai.NotFoundError) as info:
        await gateway.openai().chat.completions.create(
            model="gpt-9", messages=[{"role": "user", "content": "hi"}]
        )
    assert info.value.body == {  # type: ignore[comparison-overlap]
        "message": "The model `gpt-9` does not exist or you do not have access to it. "
        "GET /openai/v1/models lists the models you can use.",
        "type": "invalid_request_error",
        "param": "model",
        "code": "model_not_found",
    }


async def test_upstream_529_becomes_503_with_retry_after(gateway: Gateway) -> None:
    with pytest.raises(openai.InternalServerError) as info:
        await gateway.openai().chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "busy [sim:status=529]"}]
        )
    assert info.value.status_code == 503
    assert int(info.value.response.headers["retry-after"]) >= 1


async def test_ignored_fields_never_reach_the_model(gateway: Gateway) -> None:
    rid = f"oa-ignored-{time.time_ns()}"
    await gateway.openai().chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "hi"}],
        user="u-1",
        seed=7,
        presence_penalty=0.5,
        frequency_penalty=0.5,
        store=True,
        metadata={"a": "b"},
        service_tier="auto",
        temperature=0,
        top_p=0.5,
        extra_body={"some_future_field": 1},
        extra_headers=rid_header(rid),
    )
    sent = (await gateway.sent_upstream(rid))["body"]
    for name in (
        "user",
        "seed",
        "presence_penalty",
        "frequency_penalty",
        "store",
        "metadata",
        "service_tier",
        "some_future_field",
        "temperature",
        "top_p",
    ):
        assert name not in sent, name
    assert sent["max_tokens"] == 32000


async def test_sampling_is_forwarded_to_sampling_models_capped(gateway: Gateway) -> None:
    rid = f"oa-sampling-{time.time_ns()}"
    await gateway.openai().chat.completions.create(
        model="claude-instant",
        messages=[{"role": "user", "content": "hi"}],
        temperature=1.7,
        top_p=1,
        max_tokens=10,
        extra_headers=rid_header(rid),
    )
    sent = (await gateway.sent_upstream(rid))["body"]
    assert sent["temperature"] == 1
    assert "top_p" not in sent
    assert sent["max_tokens"] == 10
    assert "cache_control" not in str(sent)


async def test_automatic_cache_breakpoints_and_opt_out(gateway: Gateway) -> None:
    client = gateway.openai()
    rid = f"oa-cache-{time.time_ns()}"
    messages = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "hello"},
    ]
    await client.chat.completions.create(
        model=MODEL, messages=messages, extra_headers=rid_header(rid)
    )
    sent = (await gateway.sent_upstream(rid))["body"]
    assert sent["system"][-1]["cache_control"] == {"type": "ephemeral"}
    assert sent["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert str(sent).count("cache_control") == 2

    rid_off = rid + "-off"
    await client.chat.completions.create(
        model=MODEL, messages=messages, extra_headers={**rid_header(rid_off), "x-ezat-cache": "OFF"}
    )
    assert "cache_control" not in str((await gateway.sent_upstream(rid_off))["body"])


async def test_client_cache_control_is_carried_and_none_added(gateway: Gateway) -> None:
    rid = f"oa-own-cache-{time.time_ns()}"
    await gateway.openai().chat.completions.create(
        model=MODEL,
        messages=[
            {"role": "system", "content": "sys"},
            {
                "role": "user",
                "content": [
                    {
                        "type": "text",
                        "text": "mine",
                        "cache_control": {"type": "ephemeral", "ttl": "1h"},
                    },
                    {"type": "text", "text": "not mine"},
                ],
            },
        ],
        extra_headers=rid_header(rid),
    )
    sent = (await gateway.sent_upstream(rid))["body"]
    blocks = sent["messages"][0]["content"]
    assert blocks[0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert "cache_control" not in blocks[1]
    assert str(sent).count("cache_control") == 1


async def test_second_turn_reads_the_cache(gateway: Gateway) -> None:
    client = gateway.openai()
    system = "You are a helpful assistant. " * 200  # ~1,400 tokens: above the cache minimum
    session = f"conv-{time.time_ns()}"
    messages: list[Any] = [
        {"role": "system", "content": system},
        {"role": "user", "content": "turn one"},
    ]
    first = await client.chat.completions.create(
        model=MODEL, messages=messages, prompt_cache_key=session
    )
    assert first.usage is not None and first.usage.prompt_tokens_details is not None
    assert first.usage.prompt_tokens_details.cache_write_tokens > 0  # type: ignore[attr-defined]
    messages += [
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "user", "content": "turn two"},
    ]
    second = await client.chat.completions.create(
        model=MODEL, messages=messages, extra_headers={"x-ezat-session": session}
    )
    assert second.usage is not None and second.usage.prompt_tokens_details is not None
    assert (second.usage.prompt_tokens_details.cached_tokens or 0) > 0


async def test_images_data_url_and_http_url(gateway: Gateway) -> None:
    async with images.serving() as server:
        rid = f"oa-images-{time.time_ns()}"
        data_url = "data:image/png;base64," + base64.b64encode(PNG).decode()
        await gateway.openai().chat.completions.create(
            model=MODEL,
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "What is in this image?"},
                        {"type": "image_url", "image_url": {"url": data_url, "detail": "high"}},
                        {
                            "type": "image_url",
                            "image_url": {"url": f"{server}/photo.png"},
                        },
                    ],
                }
            ],
            extra_headers=rid_header(rid),
        )
        blocks = (await gateway.sent_upstream(rid))["body"]["messages"][0]["content"]
        sent_images = [b for b in blocks if b["type"] == "image"]
        assert len(sent_images) == 2
        for block in sent_images:
            assert block["source"]["type"] == "base64"
            assert block["source"]["media_type"] == "image/png"
            assert base64.b64decode(block["source"]["data"]) == PNG
        assert "detail" not in str(blocks)

        with pytest.raises(openai.BadRequestError) as info:
            await gateway.openai().chat.completions.create(
                model=MODEL,
                messages=[
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "x"},
                            {"type": "text", "text": "y"},
                            {
                                "type": "image_url",
                                "image_url": {"url": f"{server}/missing.png"},
                            },
                        ],
                    }
                ],
            )
        assert info.value.body["message"] == (  # type: ignore[index]
            "messages[0].content[2].image_url.url: could not download the image (HTTP 404)"
        )


async def test_pdf_file_part(gateway: Gateway) -> None:
    rid = f"oa-pdf-{time.time_ns()}"
    pdf = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"
    await gateway.openai().chat.completions.create(
        model=MODEL,
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Summarise"},
                    {
                        "type": "file",
                        "file": {
                            "file_data": "data:application/pdf;base64,"
                            + base64.b64encode(pdf).decode()
                        },
                    },
                ],
            }
        ],
        extra_headers=rid_header(rid),
    )
    blocks = (await gateway.sent_upstream(rid))["body"]["messages"][0]["content"]
    doc = next(b for b in blocks if b["type"] == "document")
    assert doc["source"]["media_type"] == "application/pdf"
    assert base64.b64decode(doc["source"]["data"]) == pdf
