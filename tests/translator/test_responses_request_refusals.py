"""Every refusal of the Responses translation, with its exact message (docs/responses.md,
"Refused"): status 400, ``invalid_request_error``, ``param`` the path, and the message the path,
": " and what to do instead."""

from __future__ import annotations

from typing import Any

import pytest
from ezat_common.errors import GatewayError

from .openai_to_anthropic_support import PNG, data_url
from .responses_request_support import call, output, request, translate, user

F = {"type": "function", "name": "f"}
OPEN = {"type": "object", "properties": {}}
NO_FILE_ID = "file_id is not supported: there is no Files API"
PDF_AS = "send the PDF as file_data (data:application/pdf;base64,...)"


def parts(*items: dict[str, Any], role: str = "user") -> list[dict[str, Any]]:
    return [{"role": role, "content": list(items)}]


# (id, request body, param, exact message without the "param: " prefix)
REFUSALS: list[tuple[str, dict[str, Any], str, str]] = [
    # ---- built-in tools ----
    *(
        (
            f"tool_{kind}",
            request(tools=[{"type": kind}]),
            "tools[0].type",
            f"the built-in tool {kind} is not supported; use function or custom tools",
        )
        for kind in (
            "file_search",
            "computer_use_preview",
            "code_interpreter",
            "image_generation",
            "mcp",
            "local_shell",
        )
    ),
    (
        "tool_unknown",
        request(tools=[F, {"type": "shell"}]),
        "tools[1].type",
        'must be "function", "custom", "namespace", "web_search" or "web_search_preview"; '
        "got 'shell'",
    ),
    (
        "tool_web_fetch",  # Anthropic's web fetch has no OpenAI tool type to map from
        request(tools=[{"type": "web_fetch"}]),
        "tools[0].type",
        'must be "function", "custom", "namespace", "web_search" or "web_search_preview"; '
        "got 'web_fetch'",
    ),
    (
        "web_search_twice",
        request(tools=[{"type": "web_search"}, {"type": "web_search_preview"}]),
        "tools[1].type",
        "web search is already in tools; send it once",
    ),
    (
        "web_search_context_size",
        request(tools=[{"type": "web_search", "search_context_size": "huge"}]),
        "tools[0].search_context_size",
        'must be "low", "medium" or "high"; got \'huge\'',
    ),
    (
        "web_search_allowed_domains",
        request(tools=[{"type": "web_search", "filters": {"allowed_domains": "a.example"}}]),
        "tools[0].filters.allowed_domains",
        'must be a list of domain names, such as ["example.com"]',
    ),
    (
        "web_search_filters",
        request(tools=[{"type": "web_search", "filters": ["a.example"]}]),
        "tools[0].filters",
        "must be an object",
    ),
    (
        "web_search_location_type",
        request(tools=[{"type": "web_search_preview", "user_location": {"type": "exact"}}]),
        "tools[0].user_location.type",
        "must be \"approximate\"; got 'exact'",
    ),
    (
        "web_search_domain_with_scheme",
        request(
            tools=[
                {
                    "type": "web_search",
                    "filters": {"allowed_domains": ["a.example", "https://b.example"]},
                }
            ]
        ),
        "tools[0].filters.allowed_domains[1]",
        "must be a domain name without a scheme; got 'https://b.example'",
    ),
    (
        "web_search_location_country",
        request(tools=[{"type": "web_search", "user_location": {"country": "France"}}]),
        "tools[0].user_location.country",
        "must be a two-letter ISO 3166-1 country code, such as \"GB\"; got 'France'",
    ),
    (
        "web_search_location_city",
        request(tools=[{"type": "web_search", "user_location": {"city": 7}}]),
        "tools[0].user_location.city",
        "must be a string",
    ),
    (
        "tool_choice_web_search_without_the_tool",
        request(tools=[F], tool_choice={"type": "web_search_preview"}),
        "tool_choice.type",
        "no tool named 'web_search' in tools",
    ),
    (
        "tool_name_empty",
        request(tools=[{"type": "function", "name": ""}]),
        "tools[0].name",
        "must not be empty",
    ),
    ("tool_name_missing", request(tools=[{"type": "function"}]), "tools[0].name", "Field required"),
    (
        "tool_strict_open_schema",
        request(tools=[{"type": "function", "name": "f", "parameters": OPEN, "strict": True}]),
        "tools[0].parameters",
        'objects need "additionalProperties": false',
    ),
    (
        "custom_format_unknown",
        request(tools=[{"type": "custom", "name": "c", "format": {"type": "regex"}}]),
        "tools[0].format.type",
        'must be "text" or "grammar"; got \'regex\'',
    ),
    (
        "tool_choice_built_in",
        request(tools=[F], tool_choice={"type": "file_search"}),
        "tool_choice.type",
        "the built-in tool file_search is not supported",
    ),
    (
        "tool_choice_allowed_tools",
        request(tools=[F], tool_choice={"type": "allowed_tools", "mode": "auto", "tools": [F]}),
        "tool_choice.type",
        'must be "function" or "custom"; got \'allowed_tools\'',
    ),
    (
        "tool_choice_unknown_name",
        request(tools=[F], tool_choice={"type": "function", "name": "g"}),
        "tool_choice.name",
        "no tool named 'g' in tools",
    ),
    (
        "tool_choice_unknown_mode",
        request(tools=[F], tool_choice="sometimes"),
        "tool_choice",
        'must be "auto", "required", "none" or {"type": "function", "name": ...}; '
        "got 'sometimes'",
    ),
    # ---- top-level fields ----
    (
        "background",
        request(background=True),
        "background",
        "background responses are not supported; send false or leave it out",
    ),
    (
        "truncation_auto",
        request(truncation="auto"),
        "truncation",
        'automatic truncation is not supported; send "disabled" or leave it out',
    ),
    (
        "truncation_other",
        request(truncation="end"),
        "truncation",
        "must be \"disabled\"; got 'end'",
    ),
    ("n_2", request(n=2), "n", "only one choice is supported; send n: 1 or leave it out"),
    (
        "conversation",
        request(conversation="conv_1"),
        "conversation",
        "conversations are not supported; send the conversation's items in input",
    ),
    (
        "prompt",
        request(prompt={"id": "pmpt_1"}),
        "prompt",
        "prompt templates are not supported; send instructions and input",
    ),
    (
        "top_logprobs",
        request(top_logprobs=2),
        "top_logprobs",
        "log probabilities are not supported",
    ),
    (
        "json_object",
        request(text={"format": {"type": "json_object"}}),
        "text.format.type",
        "json_object is not supported: there is no schema to enforce; use json_schema",
    ),
    (
        "text_format_unknown",
        request(text={"format": {"type": "xml"}}),
        "text.format.type",
        'must be "text" or "json_schema"; got \'xml\'',
    ),
    (
        "json_schema_without_schema",
        request(text={"format": {"type": "json_schema", "name": "x"}}),
        "text.format.schema",
        "Field required",
    ),
    (
        "json_schema_open_object",
        request(
            text={
                "format": {
                    "type": "json_schema",
                    "name": "x",
                    "schema": {
                        "type": "object",
                        "properties": {"a": OPEN},
                        "additionalProperties": False,
                    },
                }
            }
        ),
        "text.format.schema.properties.a",
        'objects need "additionalProperties": false',
    ),
    (
        "json_schema_without_structured_output",
        request(
            model="test/blind",
            text={"format": {"type": "json_schema", "name": "x", "schema": {"type": "string"}}},
        ),
        "text.format",
        "`test/blind` does not support structured output",
    ),
    (
        "max_output_tokens_0",
        request(max_output_tokens=0),
        "max_output_tokens",
        "must be an integer of at least 1",
    ),
    ("temperature_3", request(temperature=3), "temperature", "must be between 0 and 2"),
    ("top_p_2", request(top_p=2), "top_p", "must be between 0 and 1"),
    (
        "prompt_cache_key_long",
        request(prompt_cache_key="k" * 257),
        "prompt_cache_key",
        "must be at most 256 characters",
    ),
    # ---- reasoning ----
    (
        "effort_unknown",
        request(model="test/adaptive", reasoning={"effort": "huge"}),
        "reasoning.effort",
        "must be one of none, minimal, low, medium, high, xhigh, max; got 'huge'",
    ),
    (
        "effort_missing_level",
        request(model="test/adaptive-old", reasoning={"effort": "xhigh"}),
        "reasoning.effort",
        "`test/adaptive-old` has no xhigh level; use one of none, low, medium, high, max",
    ),
    (
        "effort_on_a_model_without_thinking",
        request(reasoning={"effort": "low"}),
        "reasoning.effort",
        "`test/plain` does not think; send none or leave the field out",
    ),
    (
        "effort_budget_above_the_limit",
        request(model="test/budget", max_output_tokens=1024, reasoning={"effort": "low"}),
        "max_output_tokens",
        "must be above 1024 to think with reasoning.effort low (the thinking budget is at least "
        "1024 tokens and below the output limit); raise it or send reasoning.effort none",
    ),
    # ---- input ----
    ("input_empty", request(input=[]), "input", "must contain at least one user message"),
    ("input_missing", {"model": "test/plain"}, "input", "must contain at least one user message"),
    (
        "input_only_system",
        request(input=[{"role": "system", "content": "s"}]),
        "input",
        "must contain at least one user message",
    ),
    ("input_wrong_type", request(input=5), "input", "Expected `str | array`, got `int`"),
    ("item_not_an_object", request(input=["hi"]), "input[0]", "Expected `object`, got `str`"),
    (
        "item_without_type_or_role",
        request(input=[{"content": "hi"}]),
        "input[0].type",
        "Field required; a message item may send a role",
    ),
    (
        "item_unknown",
        request(input=[user("q"), {"type": "file_search_call", "id": "fs_1"}]),
        "input[1].type",
        "'file_search_call' items are not supported; send one of message, function_call, "
        "function_call_output, custom_tool_call, custom_tool_call_output, reasoning, "
        "web_search_call",
    ),
    (
        "item_reference",
        request(input=[{"type": "item_reference", "id": "msg_1"}]),
        "input[0].type",
        "item references are not supported; send the item itself",
    ),
    (
        "role_unknown",
        request(input=[{"role": "tool", "content": "x"}]),
        "input[0].role",
        "must be one of user, assistant, system, developer; got 'tool'",
    ),
    (
        "message_without_content",
        request(input=[{"role": "user"}]),
        "input[0].content",
        "Field required",
    ),
    (
        "part_unknown",
        request(input=parts({"type": "text", "text": "x"})),
        "input[0].content[0].type",
        "unknown content part type 'text'; use input_text, output_text, input_image or input_file",
    ),
    (
        "part_text_missing",
        request(input=parts({"type": "input_text"})),
        "input[0].content[0].text",
        "Field required",
    ),
    (
        "part_audio",
        request(input=parts({"type": "input_audio", "input_audio": {"data": "", "format": "wav"}})),
        "input[0].content[0]",
        "audio input is not supported",
    ),
    (
        "image_file_id",
        request(input=parts({"type": "input_image", "file_id": "file_1"})),
        "input[0].content[0].file_id",
        f"{NO_FILE_ID}; send the image as image_url (a data URL or an http(s) URL)",
    ),
    (
        "image_without_url",
        request(input=parts({"type": "input_image"})),
        "input[0].content[0].image_url",
        "Field required",
    ),
    (
        "image_ftp",
        request(input=parts({"type": "input_image", "image_url": "ftp://e.com/a.png"})),
        "input[0].content[0].image_url",
        "must be a data URL (data:<type>;base64,<data>) or an http(s) URL",
    ),
    (
        "image_mislabelled",
        request(input=parts({"type": "input_image", "image_url": data_url("image/jpeg", PNG)})),
        "input[0].content[0].image_url",
        "the data is declared as image/jpeg but the bytes are image/png",
    ),
    (
        "image_blind_model",
        request(
            model="test/blind",
            input=parts({"type": "input_image", "image_url": "https://e.com/a.png"}),
        ),
        "input[0].content[0].image_url",
        "`test/blind` does not accept images",
    ),
    (
        "image_in_assistant",
        request(
            input=parts(
                {"type": "input_image", "image_url": "https://e.com/a.png"}, role="assistant"
            )
        ),
        "input[0].content[0].type",
        "input_image parts are accepted in user messages only",
    ),
    (
        "file_file_id",
        request(input=parts({"type": "input_file", "file_id": "file_1"})),
        "input[0].content[0].file_id",
        f"{NO_FILE_ID}; {PDF_AS}",
    ),
    (
        "file_url",
        request(input=parts({"type": "input_file", "file_url": "https://e.com/a.pdf"})),
        "input[0].content[0].file_url",
        f"file URLs are not supported; {PDF_AS}",
    ),
    (
        "file_without_data",
        request(input=parts({"type": "input_file", "filename": "a.pdf"})),
        "input[0].content[0].file_data",
        "Field required",
    ),
    (
        "file_not_pdf",
        request(input=parts({"type": "input_file", "file_data": data_url("image/png", PNG)})),
        "input[0].content[0].file_data",
        "image/png is not supported; use one of application/pdf",
    ),
    (
        "system_image",
        request(
            input=parts(
                {"type": "input_image", "image_url": "https://e.com/a.png"}, role="developer"
            )
        ),
        "input[0].content[0].type",
        "developer messages take text parts only (input_text)",
    ),
    (
        "call_bad_arguments",
        request(input=[user("q"), call("c1", "f", "{")]),
        "input[1].arguments",
        "is not valid JSON (Input data was truncated)",
    ),
    (
        "call_arguments_not_an_object",
        request(input=[user("q"), call("c1", "f", "[1]")]),
        "input[1].arguments",
        "must be a JSON object",
    ),
    (
        "call_without_call_id",
        request(input=[{"type": "function_call", "name": "f", "arguments": "{}"}]),
        "input[0].call_id",
        "Field required",
    ),
    (
        "output_before_its_call",
        request(input=[user("q"), output("c1"), call("c1")]),
        "input[1].call_id",
        "no function_call or custom_tool_call with call_id 'c1' before this item; send the call "
        "before its output (or previous_response_id)",
    ),
    (
        "output_image_part",
        request(
            input=[
                user("q"),
                call("c1"),
                {
                    "type": "function_call_output",
                    "call_id": "c1",
                    "output": [{"type": "input_image", "image_url": "https://e.com/a.png"}],
                },
            ]
        ),
        "input[2].output[0].type",
        "tool outputs take text parts only (input_text)",
    ),
    (
        "output_wrong_type",
        request(
            input=[
                user("q"),
                call("c1"),
                {"type": "function_call_output", "call_id": "c1", "output": 3},
            ]
        ),
        "input[2].output",
        "Expected `str | array`, got `int`",
    ),
    (
        "custom_call_input_not_a_string",
        request(input=[{"type": "custom_tool_call", "call_id": "c", "name": "p", "input": {}}]),
        "input[0].input",
        "Expected `str`, got `object`",
    ),
    (
        "reasoning_bad_blob_type",
        request(input=[{"type": "reasoning", "encrypted_content": 5}]),
        "input[0].encrypted_content",
        "Expected `str`, got `int`",
    ),
    # ---- wrong types of accepted fields ----
    ("metadata_not_strings", request(metadata={"k": 1}), "metadata", "Expected `str`, got `int`"),
    ("stream_not_bool", request(stream="yes"), "stream", "Expected `bool`, got `str`"),
    (
        "instructions_not_a_string",
        request(instructions=["x"]),
        "instructions",
        "Expected `str`, got `array`",
    ),
    (
        "tools_not_a_list",
        request(tools={"type": "function"}),
        "tools",
        "Expected `array`, got `object`",
    ),
    # ---- metadata: OpenAI's limits (the response object repeats it) ----
    (
        "metadata_too_many_pairs",
        request(metadata={f"k{i}": "v" for i in range(17)}),
        "metadata",
        "at most 16 key-value pairs are allowed; got 17: send fewer",
    ),
    (
        "metadata_key_too_long",
        request(metadata={"k" * 65: "v"}),
        "metadata",
        f"a key is longer than 64 characters (`{'k' * 64}...`, 65); shorten it",
    ),
    (
        "metadata_value_too_long",
        request(metadata={"note": "v" * 513}),
        "metadata.note",
        "is longer than 512 characters (513); shorten it",
    ),
]


@pytest.mark.parametrize(
    ("body", "param", "message"), [c[1:] for c in REFUSALS], ids=[c[0] for c in REFUSALS]
)
def test_refused(body: dict[str, Any], param: str, message: str) -> None:
    with pytest.raises(GatewayError) as info:
        translate(body)
    err = info.value
    assert (err.status, err.type, err.param) == (400, "invalid_request_error", param)
    assert err.message == f"{param}: {message}"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"", "request body: is empty; send a JSON object"),
        (b"[1]", "request body: must be a JSON object"),
        (b"{", "request body: is not valid JSON (Input data was truncated)"),
    ],
)
def test_malformed_body(raw: bytes, message: str) -> None:
    with pytest.raises(GatewayError) as info:
        translate(raw)
    assert (info.value.status, info.value.message) == (400, message)


def test_model_required_and_unknown_model() -> None:
    with pytest.raises(GatewayError) as info:
        translate({"input": "hi"})
    assert info.value.message == "model: Field required"
    with pytest.raises(GatewayError) as info:
        translate(request(model="gpt-9"))
    assert info.value.status == 404
    assert info.value.code == "model_not_found"
    assert info.value.message.endswith("GET /openai/v1/models lists the models you can use.")


def test_a_refused_tool_is_named_even_beside_a_valid_loop() -> None:
    body = request(input=[user("q"), call("c1"), output("c1")], tools=[F, {"type": "mcp"}])
    with pytest.raises(GatewayError, match=r"^tools\[1\]\.type: "):
        translate(body)
