"""Every refusal of the Chat Completions translation: status, ``param`` and the message's start.

The message always starts with the path of the refused field then ": ", and ``param`` is that
path, so that the client is told exactly which part of its request to fix.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from ezat_common.errors import GatewayError

from .openai_to_anthropic_support import GIF, JPEG, PDF, PNG, WEBP, data_url, request, translate

U: dict[str, Any] = {"role": "user", "content": "hi"}
TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}


def user(*parts: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"role": "user", "content": list(parts)}]


def image(url: str) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": url}}


def schema(s: dict[str, Any]) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": "x", "schema": s}}


OPEN = {"type": "object", "properties": {}}
CLOSED = {"type": "object", "properties": {}, "additionalProperties": False}

# (id, request body, status, param, message prefix)
REFUSALS: list[tuple[str, dict[str, Any], int, str | None, str]] = [
    # ---- refused fields (docs/api.md, "Refused") ----
    ("n_2", request(n=2), 400, "n", "n: "),
    ("n_0", request(n=0), 400, "n", "n: "),
    ("logprobs_true", request(logprobs=True), 400, "logprobs", "logprobs: "),
    ("top_logprobs_0", request(top_logprobs=0), 400, "top_logprobs", "top_logprobs: "),
    ("top_logprobs_5", request(top_logprobs=5), 400, "top_logprobs", "top_logprobs: "),
    ("logit_bias", request(logit_bias={"50256": -100}), 400, "logit_bias", "logit_bias: "),
    ("modalities_audio", request(modalities=["text", "audio"]), 400, "modalities", "modalities: "),
    ("modalities_empty", request(modalities=[]), 400, "modalities", "modalities: "),
    ("audio", request(audio={"voice": "alloy", "format": "mp3"}), 400, "audio", "audio: "),
    (
        "web_search_options_not_an_object",
        request(web_search_options=[]),
        400,
        "web_search_options",
        "web_search_options: must be an object",
    ),
    (
        "web_search_options_context_size",
        request(web_search_options={"search_context_size": "max"}),
        400,
        "web_search_options.search_context_size",
        'web_search_options.search_context_size: must be "low", "medium" or "high"',
    ),
    (
        "web_search_options_country",
        request(
            web_search_options={
                "user_location": {"type": "approximate", "approximate": {"country": "fr-FR"}}
            }
        ),
        400,
        "web_search_options.user_location.approximate.country",
        "web_search_options.user_location.approximate.country: must be a two-letter",
    ),
    (
        "web_search_options_location",
        request(web_search_options={"user_location": {"type": "exact", "approximate": {}}}),
        400,
        "web_search_options.user_location.type",
        'web_search_options.user_location.type: must be "approximate"',
    ),
    ("functions", request(functions=[{"name": "f"}]), 400, "functions", "functions: "),
    ("function_call", request(function_call="auto"), 400, "function_call", "function_call: "),
    (
        "role_function",
        request(messages=[U, {"role": "function", "name": "f", "content": "x"}]),
        400,
        "messages[1].role",
        "messages[1].role: ",
    ),
    (
        "json_object",
        request(response_format={"type": "json_object"}),
        400,
        "response_format.type",
        "response_format.type: json_object is not supported",
    ),
    (
        "input_audio",
        request(
            messages=[
                U,
                {
                    "role": "user",
                    "content": [
                        {"type": "input_audio", "input_audio": {"data": "x", "format": "wav"}}
                    ],
                },
            ]
        ),
        400,
        "messages[1].content[0].input_audio",
        "messages[1].content[0].input_audio: audio input is not supported",
    ),
    (
        "file_id",
        request(
            messages=user(
                {"type": "text", "text": "x"}, {"type": "file", "file": {"file_id": "file-abc"}}
            )
        ),
        400,
        "messages[0].content[1].file.file_id",
        "messages[0].content[1].file.file_id: file_id is not supported: there is no Files API",
    ),
    # ---- messages ----
    (
        "no_messages",
        request(messages=[]),
        400,
        "messages",
        "messages: must contain at least one user message",
    ),
    (
        "only_system",
        request(
            messages=[{"role": "system", "content": "s"}, {"role": "developer", "content": "d"}]
        ),
        400,
        "messages",
        "messages: must contain at least one user message",
    ),
    (
        "unknown_role",
        request(messages=[{"role": "robot", "content": "x"}]),
        400,
        "messages[0].role",
        "messages[0].role: ",
    ),
    (
        "missing_role",
        request(messages=[{"content": "x"}]),
        400,
        "messages[0].role",
        "messages[0].role: Field required",
    ),
    (
        "user_content_number",
        request(messages=[{"role": "user", "content": 5}]),
        400,
        "messages[0].content",
        "messages[0].content: ",
    ),
    (
        "unknown_part",
        request(messages=user({"type": "video", "video": {}})),
        400,
        "messages[0].content[0].type",
        "messages[0].content[0].type: ",
    ),
    (
        "system_image_part",
        request(messages=[{"role": "system", "content": [image("https://e.com/a.png")]}, U]),
        400,
        "messages[0].content[0].type",
        "messages[0].content[0].type: ",
    ),
    (
        "bad_arguments",
        request(
            messages=[
                U,
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "a",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{}"},
                        },
                        {
                            "id": "b",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{oops"},
                        },
                    ],
                },
            ]
        ),
        400,
        "messages[1].tool_calls[1].function.arguments",
        "messages[1].tool_calls[1].function.arguments: is not valid JSON",
    ),
    (
        "arguments_not_object",
        request(
            messages=[
                U,
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "a",
                            "type": "function",
                            "function": {"name": "f", "arguments": "[1]"},
                        }
                    ],
                },
            ]
        ),
        400,
        "messages[1].tool_calls[0].function.arguments",
        "messages[1].tool_calls[0].function.arguments: must be a JSON object",
    ),
    (
        "tool_message_without_id",
        request(messages=[U, {"role": "tool", "content": "x"}]),
        400,
        "messages[1].tool_call_id",
        "messages[1].tool_call_id: Field required",
    ),
    # ---- images and PDFs ----
    (
        "image_svg",
        request(messages=user(image("data:image/svg+xml;base64,PHN2Zz4="))),
        400,
        "messages[0].content[0].image_url.url",
        "messages[0].content[0].image_url.url: image/svg+xml is not supported",
    ),
    (
        "image_not_base64",
        request(messages=user(image("data:image/png,rawbytes"))),
        400,
        "messages[0].content[0].image_url.url",
        "messages[0].content[0].image_url.url: data URLs must be base64",
    ),
    (
        "image_bad_base64",
        request(messages=user(image("data:image/png;base64,%%%"))),
        400,
        "messages[0].content[0].image_url.url",
        "messages[0].content[0].image_url.url: the data of the data URL is not valid base64",
    ),
    (
        "image_png_is_jpeg",
        request(messages=user(image(data_url("image/png", JPEG)))),
        400,
        "messages[0].content[0].image_url.url",
        "messages[0].content[0].image_url.url: the data is declared as image/png"
        " but the bytes are image/jpeg",
    ),
    (
        "image_gif_is_junk",
        request(messages=user(image(data_url("image/gif", b"hello world")))),
        400,
        "messages[0].content[0].image_url.url",
        "messages[0].content[0].image_url.url: the data is declared as image/gif",
    ),
    (
        "image_webp_is_png",
        request(messages=user(image(data_url("image/webp", PNG)))),
        400,
        "messages[0].content[0].image_url.url",
        "messages[0].content[0].image_url.url: ",
    ),
    (
        "image_jpeg_is_gif",
        request(messages=user(image(data_url("image/jpeg", GIF)))),
        400,
        "messages[0].content[0].image_url.url",
        "messages[0].content[0].image_url.url: ",
    ),
    (
        "image_png_is_webp",
        request(messages=user(image(data_url("image/png", WEBP)))),
        400,
        "messages[0].content[0].image_url.url",
        "messages[0].content[0].image_url.url: ",
    ),
    (
        "image_ftp",
        request(messages=user({"type": "text", "text": "x"}, image("ftp://e.com/a.png"))),
        400,
        "messages[0].content[1].image_url.url",
        "messages[0].content[1].image_url.url: must be a data URL",
    ),
    (
        "image_file_scheme",
        request(messages=user(image("file:///etc/passwd"))),
        400,
        "messages[0].content[0].image_url.url",
        "messages[0].content[0].image_url.url: ",
    ),
    (
        "image_no_host",
        request(messages=user(image("https:///a.png"))),
        400,
        "messages[0].content[0].image_url.url",
        "messages[0].content[0].image_url.url: ",
    ),
    (
        "image_urls_21",
        request(
            messages=[
                U,
                {"role": "user", "content": [image(f"https://e.com/{k}.png") for k in range(21)]},
            ]
        ),
        400,
        "messages[1].content[20].image_url.url",
        "messages[1].content[20].image_url.url: at most 20 image URLs",
    ),
    (
        "pdf_is_png",
        request(
            messages=user({"type": "file", "file": {"file_data": data_url("application/pdf", PNG)}})
        ),
        400,
        "messages[0].content[0].file.file_data",
        "messages[0].content[0].file.file_data: the data is declared as application/pdf",
    ),
    (
        "pdf_wrong_type",
        request(
            messages=user({"type": "file", "file": {"file_data": data_url("text/plain", PDF)}})
        ),
        400,
        "messages[0].content[0].file.file_data",
        "messages[0].content[0].file.file_data: text/plain is not supported",
    ),
    (
        "file_empty",
        request(messages=user({"type": "file", "file": {}})),
        400,
        "messages[0].content[0].file.file_data",
        "messages[0].content[0].file.file_data: ",
    ),
    (
        "image_on_blind_model",
        request(model="test/blind", messages=user(image(data_url("image/png", PNG)))),
        400,
        "messages[0].content[0].image_url.url",
        "messages[0].content[0].image_url.url: ",
    ),
    (
        "pdf_on_blind_model",
        request(
            model="test/blind",
            messages=user(
                {"type": "file", "file": {"file_data": data_url("application/pdf", PDF)}}
            ),
        ),
        400,
        "messages[0].content[0].file.file_data",
        "messages[0].content[0].file.file_data: ",
    ),
    # ---- model and limits ----
    ("unknown_model", request(model="gpt-9"), 404, "model", "The model `gpt-9` does not exist"),
    ("empty_model", request(model="  "), 400, "model", "model: must be 1 to 128 characters"),
    ("long_model", request(model="m" * 129), 400, "model", "model: must be 1 to 128 characters"),
    ("model_number", request(model=5), 400, "model", "model: "),
    ("missing_model", {"messages": [U]}, 400, "model", "model: Field required"),
    ("missing_messages", {"model": "test/plain"}, 400, "messages", "messages: Field required"),
    ("max_tokens_0", request(max_tokens=0), 400, "max_tokens", "max_tokens: "),
    (
        "max_completion_tokens_negative",
        request(max_completion_tokens=-5),
        400,
        "max_completion_tokens",
        "max_completion_tokens: ",
    ),
    ("max_tokens_float", request(max_tokens=10.5), 400, "max_tokens", "max_tokens: "),
    ("max_tokens_string", request(max_tokens="10"), 400, "max_tokens", "max_tokens: "),
    ("stream_string", request(stream="yes"), 400, "stream", "stream: "),
    (
        "include_usage_string",
        request(stream=True, stream_options={"include_usage": "yes"}),
        400,
        "stream_options.include_usage",
        "stream_options.include_usage: ",
    ),
    (
        "prompt_cache_key_257",
        request(prompt_cache_key="k" * 257),
        400,
        "prompt_cache_key",
        "prompt_cache_key: ",
    ),
    (
        "prompt_cache_key_number",
        request(prompt_cache_key=5),
        400,
        "prompt_cache_key",
        "prompt_cache_key: ",
    ),
    # ---- reasoning ----
    (
        "effort_unknown",
        request(model="test/adaptive", reasoning_effort="extreme"),
        400,
        "reasoning_effort",
        "reasoning_effort: must be one of none, minimal, low, medium, high, xhigh, max",
    ),
    (
        "effort_no_xhigh_adaptive",
        request(model="test/adaptive-old", reasoning_effort="xhigh"),
        400,
        "reasoning_effort",
        "reasoning_effort: `test/adaptive-old` has no xhigh level",
    ),
    (
        "effort_no_xhigh_budget",
        request(model="test/budget-short", reasoning_effort="xhigh"),
        400,
        "reasoning_effort",
        "reasoning_effort: `test/budget-short` has no xhigh level",
    ),
    (
        "effort_no_max_budget",
        request(model="test/budget-short", reasoning_effort="max"),
        400,
        "reasoning_effort",
        "reasoning_effort: ",
    ),
    (
        "effort_on_model_without_thinking",
        request(model="test/plain", reasoning_effort="low"),
        400,
        "reasoning_effort",
        "reasoning_effort: ",
    ),
    (
        "effort_minimal_on_model_without_thinking",
        request(model="test/plain", reasoning_effort="minimal"),
        400,
        "reasoning_effort",
        "reasoning_effort: ",
    ),
    (
        "effort_no_xhigh_even_when_tool_forced",
        request(
            model="test/adaptive-old",
            reasoning_effort="xhigh",
            tools=[TOOL],
            tool_choice="required",
        ),
        400,
        "reasoning_effort",
        "reasoning_effort: ",
    ),
    (
        "budget_impossible_max_tokens",
        request(model="test/budget", reasoning_effort="low", max_tokens=1024),
        400,
        "max_completion_tokens",
        "max_completion_tokens: ",
    ),
    (
        "budget_impossible_default",
        request(model="test/tiny", reasoning_effort="low"),
        400,
        "max_completion_tokens",
        "max_completion_tokens: ",
    ),
    (
        "effort_number",
        request(model="test/adaptive", reasoning_effort=3),
        400,
        "reasoning_effort",
        "reasoning_effort: ",
    ),
    # ---- sampling ----
    ("temperature_negative", request(temperature=-0.1), 400, "temperature", "temperature: "),
    ("temperature_above_2", request(temperature=2.5), 400, "temperature", "temperature: "),
    (
        "temperature_above_2_on_model_without_sampling",
        request(model="test/adaptive", temperature=3),
        400,
        "temperature",
        "temperature: ",
    ),
    ("top_p_above_1", request(top_p=1.5), 400, "top_p", "top_p: "),
    ("top_p_negative", request(top_p=-1), 400, "top_p", "top_p: "),
    # ---- output ----
    ("stop_empty", request(stop=["END", " "]), 400, "stop[1]", "stop[1]: "),
    ("stop_number", request(stop=5), 400, "stop", "stop: "),
    (
        "format_unknown",
        request(response_format={"type": "xml"}),
        400,
        "response_format.type",
        "response_format.type: ",
    ),
    (
        "format_without_schema",
        request(response_format={"type": "json_schema", "json_schema": {"name": "x"}}),
        400,
        "response_format.json_schema.schema",
        "response_format.json_schema.schema: ",
    ),
    (
        "format_without_json_schema",
        request(response_format={"type": "json_schema"}),
        400,
        "response_format.json_schema",
        "response_format.json_schema: ",
    ),
    (
        "format_root_open",
        request(response_format=schema(OPEN)),
        400,
        "response_format.json_schema.schema",
        'response_format.json_schema.schema: objects need "additionalProperties": false',
    ),
    (
        "format_root_true",
        request(response_format=schema({**OPEN, "additionalProperties": True})),
        400,
        "response_format.json_schema.schema",
        "response_format.json_schema.schema: ",
    ),
    (
        "format_nested_property",
        request(
            response_format=schema(
                {**CLOSED, "properties": {"name": {"type": "string"}, "address": OPEN}}
            )
        ),
        400,
        "response_format.json_schema.schema.properties.address",
        "response_format.json_schema.schema.properties.address: "
        'objects need "additionalProperties": false',
    ),
    (
        "format_items",
        request(
            response_format=schema(
                {**CLOSED, "properties": {"a": {"type": "array", "items": OPEN}}}
            )
        ),
        400,
        "response_format.json_schema.schema.properties.a.items",
        "response_format.json_schema.schema.properties.a.items: ",
    ),
    (
        "format_any_of",
        request(response_format=schema({"anyOf": [CLOSED, OPEN]})),
        400,
        "response_format.json_schema.schema.anyOf[1]",
        "response_format.json_schema.schema.anyOf[1]: ",
    ),
    (
        "format_all_of",
        request(response_format=schema({"allOf": [OPEN]})),
        400,
        "response_format.json_schema.schema.allOf[0]",
        "response_format.json_schema.schema.allOf[0]: ",
    ),
    (
        "format_one_of",
        request(response_format=schema({"oneOf": [CLOSED, CLOSED, OPEN]})),
        400,
        "response_format.json_schema.schema.oneOf[2]",
        "response_format.json_schema.schema.oneOf[2]: ",
    ),
    (
        "format_defs",
        request(response_format=schema({**CLOSED, "$defs": {"Address": OPEN}})),
        400,
        "response_format.json_schema.schema.$defs.Address",
        "response_format.json_schema.schema.$defs.Address: ",
    ),
    (
        "format_definitions",
        request(
            response_format=schema({**CLOSED, "definitions": {"A": {"type": ["object", "null"]}}})
        ),
        400,
        "response_format.json_schema.schema.definitions.A",
        "response_format.json_schema.schema.definitions.A: ",
    ),
    (
        "format_additional_properties_schema",
        request(response_format=schema({"type": "array", "items": {"additionalProperties": OPEN}})),
        400,
        "response_format.json_schema.schema.items.additionalProperties",
        "response_format.json_schema.schema.items.additionalProperties: ",
    ),
    (
        "format_on_model_without_structured_output",
        request(model="test/blind", response_format=schema(CLOSED)),
        400,
        "response_format",
        "response_format: ",
    ),
    # ---- tools ----
    (
        "tool_type",
        request(tools=[{"type": "custom", "function": {"name": "f"}}]),
        400,
        "tools[0].type",
        "tools[0].type: ",
    ),
    (
        "tool_without_function",
        request(tools=[{"type": "function"}]),
        400,
        "tools[0].function",
        "tools[0].function: Field required",
    ),
    (
        "tool_empty_name",
        request(tools=[TOOL, {"type": "function", "function": {"name": ""}}]),
        400,
        "tools[1].function.name",
        "tools[1].function.name: ",
    ),
    (
        "tool_choice_unknown",
        request(tools=[TOOL], tool_choice="sometimes"),
        400,
        "tool_choice",
        "tool_choice: ",
    ),
    (
        "tool_choice_unknown_name",
        request(tools=[TOOL], tool_choice={"type": "function", "function": {"name": "g"}}),
        400,
        "tool_choice.function.name",
        "tool_choice.function.name: ",
    ),
    (
        "parallel_tool_calls_string",
        request(tools=[TOOL], parallel_tool_calls="no"),
        400,
        "parallel_tool_calls",
        "parallel_tool_calls: ",
    ),
]


@pytest.mark.parametrize(
    ("body", "status", "param", "prefix"),
    [case[1:] for case in REFUSALS],
    ids=[case[0] for case in REFUSALS],
)
def test_refused(body: dict[str, Any], status: int, param: str | None, prefix: str) -> None:
    with pytest.raises(GatewayError) as info:
        translate(body)
    err = info.value
    assert err.status == status
    assert err.param == param
    assert err.message.startswith(prefix), err.message
    if status == 400:
        assert err.type == "invalid_request_error"
        assert err.message.startswith(f"{param}: ")


@pytest.mark.parametrize(
    "raw",
    [b"", b"   ", b"{", b"[1, 2]", b'"text"', b"null", b'{"model": "test/plain", "messages": [}'],
)
def test_malformed_body(raw: bytes) -> None:
    with pytest.raises(GatewayError) as info:
        translate(raw)
    assert info.value.status == 400
    assert info.value.message.startswith("request body: ")


def test_unknown_model_keeps_the_name_as_sent() -> None:
    with pytest.raises(GatewayError) as info:
        translate(request(model="GPT-9 "))
    assert info.value.code == "model_not_found"
    assert info.value.message == (
        "The model `GPT-9 ` does not exist or you do not have access to it. "
        "GET /openai/v1/models lists the models you can use."
    )


@pytest.mark.parametrize(
    "fields",
    [
        {"n": 1},
        {"logprobs": False},
        {"logit_bias": {}},
        {"modalities": ["text"]},
        {"n": None, "top_logprobs": None, "audio": None, "functions": None, "function_call": None},
        {"prompt_cache_key": "k" * 256},
        {"temperature": 2, "top_p": 0},
    ],
)
def test_accepted_edge_values(fields: dict[str, Any]) -> None:
    translate(request(**fields))


def test_twenty_image_urls_are_accepted() -> None:
    images = [image(f"https://e.com/{k}.png") for k in range(20)]
    t = translate(request(messages=[{"role": "user", "content": images}]))
    assert len(t.image_urls) == 20


def test_each_supported_image_type_is_accepted() -> None:
    parts = [
        image(data_url(kind, raw))
        for kind, raw in [
            ("image/jpeg", JPEG),
            ("image/png", PNG),
            ("image/gif", GIF),
            ("image/webp", WEBP),
        ]
    ]
    t = translate(request(messages=[{"role": "user", "content": parts}]))
    blocks = t.body["messages"][0]["content"]
    assert [b["source"]["media_type"] for b in blocks] == [
        "image/jpeg",
        "image/png",
        "image/gif",
        "image/webp",
    ]


def test_refusal_is_json_encodable_for_the_envelope() -> None:
    with pytest.raises(GatewayError) as info:
        translate(request(n=3))
    assert msgspec.json.encode({"message": info.value.message, "param": info.value.param})
