"""``to_messages_request`` of the Responses API, one table per input item type and per option:
the request (on the plain model: no automatic caching, no thinking) and the exact Messages body
it becomes."""

from __future__ import annotations

from typing import Any

import pytest
from ezat_translator.core.turns import ImageUrlPart

from .openai_to_anthropic_support import PDF, PNG, data_url
from .responses_request_support import call, output, request, restore_thinking, translate, user

PNG_URL = data_url("image/png", PNG)
PDF_URL = data_url("application/pdf", PDF)
PNG_DATA = PNG_URL.split(",", 1)[1]
PDF_DATA = PDF_URL.split(",", 1)[1]


def body_of(**fields: Any) -> dict[str, Any]:
    return translate(request(**fields)).body


def messages_of(items: Any, **fields: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = body_of(input=items, **fields)["messages"]
    return out


# ---- message items --------------------------------------------------------------------------

MESSAGES: list[tuple[str, Any, list[dict[str, Any]]]] = [
    ("input_string", "hello", [{"role": "user", "content": "hello"}]),
    ("item_without_type", [{"role": "user", "content": "hi"}], [{"role": "user", "content": "hi"}]),
    ("typed_message", [user("hi")], [{"role": "user", "content": "hi"}]),
    (
        "input_text_parts",
        [
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "a"},
                    {"type": "input_text", "text": "b"},
                ],
            }
        ],
        [
            {
                "role": "user",
                "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            }
        ],
    ),
    (
        "empty_text_dropped",
        [
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": ""},
                    {"type": "input_text", "text": "b"},
                ],
            }
        ],
        [{"role": "user", "content": "b"}],
    ),
    (
        "assistant_output_text_and_refusal",
        [
            user("q"),
            {
                "type": "message",
                "role": "assistant",
                "id": "msg_1",
                "status": "completed",
                "content": [
                    {"type": "output_text", "text": "an answer", "annotations": []},
                    {"type": "refusal", "refusal": "no"},
                ],
            },
            user("again"),
        ],
        [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "an answer"},
            {"role": "user", "content": "again"},
        ],
    ),
    (
        "consecutive_users_merged",
        [user("a"), user("b")],
        [
            {
                "role": "user",
                "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            }
        ],
    ),
    (
        "assistant_first_kept",
        [{"role": "assistant", "content": "hello"}, user("hi")],
        [{"role": "assistant", "content": "hello"}, {"role": "user", "content": "hi"}],
    ),
    (
        "image_data_url",
        [
            {
                "role": "user",
                "content": [{"type": "input_image", "image_url": PNG_URL, "detail": "high"}],
            }
        ],
        [
            {
                "role": "user",
                "content": [
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": PNG_DATA},
                    }
                ],
            }
        ],
    ),
    (
        "image_http_url_left_for_the_fetcher",
        [
            {
                "role": "user",
                "content": [{"type": "input_image", "image_url": "https://e.com/a.png"}],
            }
        ],
        [
            {
                "role": "user",
                "content": [
                    {"type": "image", "source": {"type": "url", "url": "https://e.com/a.png"}}
                ],
            }
        ],
    ),
    (
        "pdf_data_url",
        [
            {
                "role": "user",
                "content": [{"type": "input_file", "filename": "a.pdf", "file_data": PDF_URL}],
            }
        ],
        [
            {
                "role": "user",
                "content": [
                    {
                        "type": "document",
                        "source": {
                            "type": "base64",
                            "media_type": "application/pdf",
                            "data": PDF_DATA,
                        },
                    }
                ],
            }
        ],
    ),
]


@pytest.mark.parametrize(
    ("items", "expected"), [c[1:] for c in MESSAGES], ids=[c[0] for c in MESSAGES]
)
def test_message_items(items: Any, expected: list[dict[str, Any]]) -> None:
    assert messages_of(items) == expected


SYSTEMS: list[tuple[str, dict[str, Any], str | None]] = [
    ("none", {}, None),
    ("instructions", {"instructions": "Be brief."}, "Be brief."),
    (
        "instructions_then_system_and_developer",
        {
            "instructions": "I",
            "input": [
                {"role": "system", "content": "S"},
                user("q"),
                {"role": "developer", "content": [{"type": "input_text", "text": "D"}]},
            ],
        },
        "I\n\nS\n\nD",
    ),
    ("empty_instructions", {"instructions": ""}, None),
]


@pytest.mark.parametrize(
    ("fields", "system"), [c[1:] for c in SYSTEMS], ids=[c[0] for c in SYSTEMS]
)
def test_system_prompt(fields: dict[str, Any], system: str | None) -> None:
    body = body_of(**fields)
    assert body.get("system") == system


def test_image_url_positions_name_the_part() -> None:
    items = [
        user("q"),
        call("c1"),
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "see"},
                {"type": "input_image", "image_url": "http://e.com/a.gif"},
            ],
        },
        output("c1"),
    ]
    t = translate(request(input=items))
    assert t.image_urls == [
        ImageUrlPart("input[2].content[1].image_url", "http://e.com/a.gif", 2, 2)
    ]
    assert [b["type"] for b in t.body["messages"][2]["content"]] == ["tool_result", "text", "image"]


# ---- function calls, custom tool calls, their outputs -------------------------------------

Q = {"role": "user", "content": "q"}


def use(call_id: str, name: str = "f", arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": arguments or {}}


def result(call_id: str, content: Any = "ok") -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id}
    if content:
        block["content"] = content
    return block


def assistant(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks)}


def results(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": list(blocks)}


CALLS: list[tuple[str, list[dict[str, Any]], list[dict[str, Any]]]] = [
    (
        "one_call_and_output",
        [user("q"), call("c1", "get", '{"city": "Oslo"}'), output("c1", "9C")],
        [Q, assistant(use("c1", "get", {"city": "Oslo"})), results(result("c1", "9C"))],
    ),
    (
        "consecutive_calls_one_assistant_turn",
        [user("q"), call("c1"), call("c2"), output("c2", "2"), output("c1", "1")],
        [Q, assistant(use("c1"), use("c2")), results(result("c2", "2"), result("c1", "1"))],
    ),
    (
        "assistant_text_then_call_one_turn",
        [user("q"), {"role": "assistant", "content": "let me look"}, call("c1"), output("c1")],
        [
            Q,
            assistant({"type": "text", "text": "let me look"}, use("c1")),
            results(result("c1")),
        ],
    ),
    (
        "results_before_user_text",
        [user("q"), call("c1"), user("also this"), output("c1")],
        [Q, assistant(use("c1")), results(result("c1"), {"type": "text", "text": "also this"})],
    ),
    (
        "output_as_text_parts_and_empty_output",
        [
            user("q"),
            call("c1"),
            call("c2"),
            {
                "type": "function_call_output",
                "call_id": "c1",
                "output": [
                    {"type": "input_text", "text": "a"},
                    {"type": "output_text", "text": "b"},
                ],
            },
            output("c2", ""),
        ],
        [
            Q,
            assistant(use("c1"), use("c2")),
            results(
                result("c1", [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]),
                result("c2", ""),
            ),
        ],
    ),
    (
        "empty_arguments_are_an_empty_object",
        [user("q"), call("c1", "f", ""), output("c1")],
        [Q, assistant(use("c1")), results(result("c1"))],
    ),
    (
        "custom_tool_call_and_output",
        [
            user("q"),
            {
                "type": "custom_tool_call",
                "call_id": "c1",
                "name": "apply_patch",
                "input": "*** Begin Patch",
            },
            {"type": "custom_tool_call_output", "call_id": "c1", "output": "Done"},
        ],
        [
            Q,
            assistant(use("c1", "apply_patch", {"input": "*** Begin Patch"})),
            results(result("c1", "Done")),
        ],
    ),
]


@pytest.mark.parametrize(("items", "expected"), [c[1:] for c in CALLS], ids=[c[0] for c in CALLS])
def test_call_items(items: list[dict[str, Any]], expected: list[dict[str, Any]]) -> None:
    assert messages_of(items) == expected


def test_output_without_its_call_is_accepted_with_previous_response_id() -> None:
    t = translate(request(input=[output("c9")], previous_response_id="resp_1"))
    assert t.body["messages"] == [
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c9", "content": "ok"}]}
    ]
    assert t.previous_response_id == "resp_1"


def test_tool_turns_point_at_the_calls() -> None:
    items = [
        user("q"),
        call("c1"),
        call("c2"),
        output("c1"),
        output("c2"),
        call("c3"),
        output("c3"),
    ]
    assert translate(request(input=items)).tool_turns == [(1, ["c1", "c2"]), (3, ["c3"])]


# ---- reasoning items ------------------------------------------------------------------------

REASONING = {
    "type": "reasoning",
    "id": "rs_1",
    "summary": [],
    "encrypted_content": "sealed-1",
}
LOOP = [user("q"), REASONING, call("c1"), output("c1")]

REASONINGS: list[tuple[str, list[dict[str, Any]], bool, list[dict[str, Any]]]] = [
    (
        "dropped_without_a_hook",
        LOOP,
        False,
        [use("c1")],
    ),
    (
        "hook_blocks_open_the_assistant_turn",
        LOOP,
        True,
        [
            {"type": "thinking", "thinking": "thought at input[1]", "signature": "sealed-1"},
            {"type": "tool_use", "id": "c1", "name": "f", "input": {}},
        ],
    ),
    (
        "without_encrypted_content_the_hook_is_not_called",
        [
            user("q"),
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": "s"}]},
            call("c1"),
            output("c1"),
        ],
        True,
        [use("c1")],
    ),
    (
        "a_hook_that_drops_the_blob",
        LOOP,
        None,
        [use("c1")],
    ),
]


@pytest.mark.parametrize(
    ("items", "hooked", "assistant"), [c[1:] for c in REASONINGS], ids=[c[0] for c in REASONINGS]
)
def test_reasoning_items(
    items: list[dict[str, Any]], hooked: bool | None, assistant: list[dict[str, Any]]
) -> None:
    def dropped(blob: str, path: str) -> list[dict[str, Any]]:
        return []

    hook = restore_thinking if hooked else (dropped if hooked is None else None)
    t = translate(request(input=items), open_reasoning=hook)
    assert t.body["messages"][1] == {"role": "assistant", "content": assistant}


def test_reasoning_hook_errors_reach_the_client() -> None:
    from ezat_common.errors import GatewayError, invalid

    def tampered(blob: str, path: str) -> list[dict[str, Any]]:
        raise invalid(f"{path}.encrypted_content", "was not sealed by this gateway")

    with pytest.raises(GatewayError, match=r"^input\[1\]\.encrypted_content: "):
        translate(request(input=LOOP), open_reasoning=tampered)


# ---- tools ----------------------------------------------------------------------------------

CLOSED = {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False}
OPEN = {"type": "object", "properties": {"a": {"type": "string"}}}
CUSTOM_SCHEMA = {
    "type": "object",
    "properties": {"input": {"type": "string"}},
    "required": ["input"],
    "additionalProperties": False,
}

TOOLS: list[tuple[str, str, dict[str, Any], dict[str, Any]]] = [
    (
        "function",
        "test/plain",
        {"type": "function", "name": "f", "description": "d", "parameters": OPEN},
        {"name": "f", "description": "d", "input_schema": OPEN},
    ),
    (
        "function_without_parameters",
        "test/plain",
        {"type": "function", "name": "f"},
        {"name": "f", "input_schema": {"type": "object", "properties": {}}},
    ),
    (
        "function_strict_false",
        "test/plain",
        {"type": "function", "name": "f", "parameters": OPEN, "strict": False},
        {"name": "f", "input_schema": OPEN},
    ),
    (
        "function_strict_honoured",
        "test/plain",
        {"type": "function", "name": "f", "parameters": CLOSED, "strict": True},
        {"name": "f", "input_schema": CLOSED, "strict": True},
    ),
    (
        "function_strict_without_parameters",
        "test/plain",
        {"type": "function", "name": "f", "strict": True},
        {
            "name": "f",
            "input_schema": {"type": "object", "properties": {}, "additionalProperties": False},
            "strict": True,
        },
    ),
    (
        "function_strict_dropped_without_structured_output",
        "test/blind",
        {"type": "function", "name": "f", "parameters": OPEN, "strict": True},
        {"name": "f", "input_schema": OPEN},
    ),
    (
        "custom_freeform",
        "test/plain",
        {"type": "custom", "name": "shell", "description": "Runs a command"},
        {"name": "shell", "description": "Runs a command", "input_schema": CUSTOM_SCHEMA},
    ),
    (
        "custom_text_format",
        "test/plain",
        {"type": "custom", "name": "shell", "format": {"type": "text"}},
        {"name": "shell", "input_schema": CUSTOM_SCHEMA},
    ),
    (
        "custom_grammar_in_the_description",
        "test/plain",
        {
            "type": "custom",
            "name": "patch",
            "description": "Edits files",
            "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"},
        },
        {
            "name": "patch",
            "description": "Edits files\n\nThe input must match this lark grammar:\nstart: /.+/",
            "input_schema": CUSTOM_SCHEMA,
        },
    ),
]


@pytest.mark.parametrize(
    ("model", "tool", "expected"), [c[1:] for c in TOOLS], ids=[c[0] for c in TOOLS]
)
def test_tools(model: str, tool: dict[str, Any], expected: dict[str, Any]) -> None:
    body = translate(request(model=model, tools=[tool]), cache_header="off").body
    assert body["tools"] == [expected]


def test_custom_tools_are_named_in_the_translation() -> None:
    tools = [{"type": "function", "name": "f"}, {"type": "custom", "name": "patch"}]
    assert translate(request(tools=tools)).custom_tools == ["patch"]


F = {"type": "function", "name": "f"}
C = {"type": "custom", "name": "patch"}

CHOICES: list[tuple[str, dict[str, Any], dict[str, Any] | None]] = [
    ("none_sent", {}, None),
    ("auto", {"tool_choice": "auto"}, {"type": "auto"}),
    ("required", {"tool_choice": "required"}, {"type": "any"}),
    ("none", {"tool_choice": "none"}, {"type": "none"}),
    (
        "named_function",
        {"tool_choice": {"type": "function", "name": "f"}},
        {"type": "tool", "name": "f"},
    ),
    (
        "named_custom",
        {"tool_choice": {"type": "custom", "name": "patch"}},
        {"type": "tool", "name": "patch"},
    ),
    (
        "parallel_false",
        {"parallel_tool_calls": False},
        {"type": "auto", "disable_parallel_tool_use": True},
    ),
    (
        "required_parallel_false",
        {"tool_choice": "required", "parallel_tool_calls": False},
        {"type": "any", "disable_parallel_tool_use": True},
    ),
    (
        "none_parallel_false",
        {"tool_choice": "none", "parallel_tool_calls": False},
        {"type": "none"},
    ),
    ("parallel_true", {"parallel_tool_calls": True}, None),
]


@pytest.mark.parametrize(
    ("fields", "expected"), [c[1:] for c in CHOICES], ids=[c[0] for c in CHOICES]
)
def test_tool_choice(fields: dict[str, Any], expected: dict[str, Any] | None) -> None:
    assert body_of(tools=[F, C], **fields).get("tool_choice") == expected


def test_without_tools_tool_choice_is_ignored() -> None:
    body = body_of(tool_choice={"type": "function", "name": "nope"}, parallel_tool_calls=False)
    assert "tool_choice" not in body


# ---- options --------------------------------------------------------------------------------

SCHEMA = {"type": "object", "properties": {"x": {"type": "integer"}}, "additionalProperties": False}

OPTIONS: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("default_limit_model_max", {}, {"max_tokens": 4096}),
    ("default_limit_32000", {"model": "test/budget"}, {"max_tokens": 32000}),
    ("max_output_tokens", {"max_output_tokens": 100}, {"max_tokens": 100}),
    ("temperature_capped", {"temperature": 1.5, "top_p": 0.5}, {"temperature": 1.0, "top_p": 0.5}),
    ("top_p_one_dropped", {"temperature": 0, "top_p": 1}, {"temperature": 0}),
    ("sampling_dropped_for_non_sampling_models", {"model": "test/blind", "temperature": 0.2}, {}),
    (
        "sampling_dropped_when_thinking",
        {"model": "test/budget", "temperature": 0.2, "reasoning": {"effort": "low"}},
        {"thinking": {"type": "enabled", "budget_tokens": 1024}},
    ),
    (
        "json_schema",
        {
            "text": {
                "format": {"type": "json_schema", "name": "x", "schema": SCHEMA, "strict": True}
            }
        },
        {"output_config": {"format": {"type": "json_schema", "schema": SCHEMA}}},
    ),
    ("text_format_text", {"text": {"format": {"type": "text"}, "verbosity": "low"}}, {}),
    (
        "effort_adaptive",
        {"model": "test/adaptive", "reasoning": {"effort": "high", "summary": "auto"}},
        {"thinking": {"type": "adaptive"}, "output_config": {"effort": "high"}},
    ),
    (
        "effort_minimal_is_low",
        {"model": "test/adaptive", "reasoning": {"effort": "minimal"}},
        {"thinking": {"type": "adaptive"}, "output_config": {"effort": "low"}},
    ),
    (
        "effort_budget_capped_below_the_limit",
        {"model": "test/budget", "max_output_tokens": 5000, "reasoning": {"effort": "high"}},
        {"max_tokens": 5000, "thinking": {"type": "enabled", "budget_tokens": 4999}},
    ),
    (
        "effort_none",
        {"model": "test/adaptive", "reasoning": {"effort": "none"}},
        {"thinking": {"type": "disabled"}},
    ),
    (
        "no_thinking_when_a_tool_is_forced",
        {
            "model": "test/adaptive",
            "reasoning": {"effort": "high"},
            "tools": [F],
            "tool_choice": "required",
        },
        {"tool_choice": {"type": "any"}},
    ),
    ("summary_alone_accepted", {"reasoning": {"summary": "detailed"}}, {}),
]


@pytest.mark.parametrize(
    ("fields", "expected"), [c[1:] for c in OPTIONS], ids=[c[0] for c in OPTIONS]
)
def test_options(fields: dict[str, Any], expected: dict[str, Any]) -> None:
    body = translate(request(**fields), cache_header="off").body
    for key in ("temperature", "top_p", "thinking", "output_config", "tool_choice"):
        assert body.get(key) == expected.get(key), key
    assert body["max_tokens"] == expected.get("max_tokens", body["max_tokens"])


ACCEPTED: dict[str, Any] = {
    "metadata": {"k": "v"},
    "user": "u",
    "safety_identifier": "s",
    "service_tier": "auto",
    "truncation": "disabled",
    "store": False,
    "include": ["reasoning.encrypted_content"],
    "stream": True,
    "background": False,
    "n": 1,
    "parallel_tool_calls": True,
    "prompt_cache_retention": "24h",
    "max_tool_calls": 3,
    "stream_options": {"include_obfuscation": False},
}


def test_accepted_fields_never_reach_the_model() -> None:
    plain = translate(request())
    t = translate(request(**ACCEPTED))
    assert t.body == plain.body
    assert t.stream is True
    assert t.store is False
    assert t.include == ["reasoning.encrypted_content"]


def test_result_defaults() -> None:
    t = translate(request())
    assert (t.stream, t.store, t.include, t.previous_response_id, t.custom_tools) == (
        False,
        True,
        [],
        None,
        [],
    )
    assert t.response_model == "test/plain"
    assert "stream" not in t.body
    assert "model" not in t.body


@pytest.mark.parametrize(
    ("header", "key", "expected"),
    [("h", "k", "h"), (None, "k", "k"), ("  ", "k", "k"), (None, None, None), (None, "", None)],
)
def test_session_key(header: str | None, key: str | None, expected: str | None) -> None:
    body = request(prompt_cache_key=key) if key is not None else request()
    assert translate(body, session_header=header).session_key == expected


def test_automatic_cache_breakpoints_as_on_the_chat_api() -> None:
    t = translate({"model": "test/adaptive", "instructions": "S", "input": "q"})
    assert t.body["system"] == [
        {"type": "text", "text": "S", "cache_control": {"type": "ephemeral"}}
    ]
    assert t.body["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "q", "cache_control": {"type": "ephemeral"}}],
        }
    ]
    assert t.cache_ttl == "5m"
    off = translate(
        {"model": "test/adaptive", "instructions": "S", "input": "q"}, cache_header="off"
    )
    assert "cache_control" not in str(off.body)


def test_client_cache_control_wins_over_automatic_breakpoints() -> None:
    marker = {"type": "ephemeral", "ttl": "1h"}
    part = {"type": "input_text", "text": "q", "cache_control": marker}
    t = translate(
        {
            "model": "test/adaptive",
            "instructions": "S",
            "input": [{"role": "user", "content": [part]}],
        }
    )
    assert t.body["system"] == "S"
    assert t.body["messages"][0]["content"] == [
        {"type": "text", "text": "q", "cache_control": marker}
    ]
    assert t.cache_ttl == "1h"
    tool = {"type": "function", "name": "f", "cache_control": {"type": "ephemeral"}}
    t = translate({"model": "test/adaptive", "input": "q", "tools": [tool]})
    assert t.body["messages"] == [{"role": "user", "content": "q"}]
    assert t.body["tools"][0]["cache_control"] == {"type": "ephemeral"}
