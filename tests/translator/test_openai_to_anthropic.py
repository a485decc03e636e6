"""Focused checks of ``to_messages_request`` beyond the golden files: the translation's metadata
(session key, usage flag, image and tool-turn positions, affinity hash) and the helpers."""

from __future__ import annotations

from typing import Any

import pytest
from ezat_translator.core.messages import prefix_hash
from ezat_translator.core.openai_output import check_closed
from ezat_translator.core.openai_to_anthropic import ImageUrlPart, located

from .openai_to_anthropic_support import request, translate

TOOL = {"type": "function", "function": {"name": "f"}}


@pytest.mark.parametrize(
    ("header", "key", "expected"),
    [
        ("h", "k", "h"),
        (None, "k", "k"),
        ("h", None, "h"),
        (None, None, None),
        ("  ", "k", "k"),
        (None, "", None),
    ],
)
def test_session_key(header: str | None, key: str | None, expected: str | None) -> None:
    body = request(prompt_cache_key=key) if key is not None else request()
    assert translate(body, session_header=header).session_key == expected


def test_prompt_cache_key_is_checked_even_when_the_header_wins() -> None:
    from ezat_common.errors import GatewayError

    with pytest.raises(GatewayError, match=r"^prompt_cache_key: "):
        translate(request(prompt_cache_key="k" * 300), session_header="h")


@pytest.mark.parametrize(
    ("fields", "stream", "usage"),
    [
        ({}, False, False),
        ({"stream": True}, True, False),
        ({"stream": True, "stream_options": {"include_usage": True}}, True, True),
        ({"stream": True, "stream_options": {"include_usage": False}}, True, False),
        ({"stream": True, "stream_options": {}}, True, False),
    ],
)
def test_stream_and_include_usage(fields: dict[str, Any], stream: bool, usage: bool) -> None:
    t = translate(request(**fields))
    assert t.stream is stream
    assert t.include_usage is usage
    # The choice travels beside the body (RouteRequest.stream); the router writes it where
    # the deployment's kind wants it, so the body never holds it.
    assert "stream" not in t.body


@pytest.mark.parametrize("header", ["off", "OFF", " Off "])
def test_cache_header_off_any_case(header: str) -> None:
    t = translate(request(model="test/adaptive"), cache_header=header)
    assert "cache_control" not in str(t.body)
    assert t.cache_ttl is None


@pytest.mark.parametrize("header", [None, "on", "", "5m"])
def test_cache_header_other_values_keep_caching(header: str | None) -> None:
    t = translate(request(model="test/adaptive"), cache_header=header)
    assert t.cache_ttl == "5m"


def test_image_positions_follow_tool_results_moved_first() -> None:
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "tool_calls": [_call("c1")]},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "see"},
                {"type": "image_url", "image_url": {"url": "http://e.com/a.gif"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "done"},
    ]
    t = translate(request(messages=messages))
    assert t.image_urls == [
        ImageUrlPart("messages[2].content[1].image_url.url", "http://e.com/a.gif", 2, 2)
    ]
    turn = t.body["messages"][2]["content"]
    assert [b["type"] for b in turn] == ["tool_result", "text", "image"]
    assert t.tool_turns == [(1, ["c1"])]


def test_tool_turns_of_merged_assistant_messages() -> None:
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a", "tool_calls": [_call("c1")]},
        {"role": "assistant", "tool_calls": [_call("c2"), _call("c3")]},
        {"role": "tool", "tool_call_id": "c1", "content": "1"},
        {"role": "tool", "tool_call_id": "c2", "content": "2"},
        {"role": "tool", "tool_call_id": "c3", "content": "3"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "again"},
        {"role": "assistant", "tool_calls": [_call("c4")]},
        {"role": "tool", "tool_call_id": "c4", "content": "4"},
    ]
    t = translate(request(messages=messages))
    assert t.tool_turns == [(1, ["c1", "c2", "c3"]), (5, ["c4"])]


def test_thinking_requested_flag() -> None:
    assert translate(request(model="test/adaptive", reasoning_effort="low")).thinking_requested
    assert translate(request(model="test/budget", reasoning_effort="low")).thinking_requested
    assert not translate(request(model="test/adaptive", reasoning_effort="none")).thinking_requested
    assert not translate(request(model="test/adaptive")).thinking_requested
    forced = request(model="test/adaptive", reasoning_effort="high", tools=[TOOL])
    forced["tool_choice"] = {"type": "function", "function": {"name": "f"}}
    t = translate(forced)
    assert not t.thinking_requested
    assert "thinking" not in t.body and "output_config" not in t.body


def test_thinking_kept_when_tool_choice_sent_without_tools() -> None:
    t = translate(request(model="test/adaptive", reasoning_effort="high", tool_choice="required"))
    assert t.thinking_requested
    assert "tool_choice" not in t.body


def test_prefix_hash_is_the_shared_one_and_tracks_system_and_tools() -> None:
    a = translate(
        request(
            model="test/adaptive",
            messages=[{"role": "system", "content": "S"}, {"role": "user", "content": "1"}],
        )
    )
    b = translate(
        request(
            model="test/adaptive",
            messages=[{"role": "system", "content": "S"}, {"role": "user", "content": "2"}],
        )
    )
    c = translate(
        request(
            model="test/adaptive",
            messages=[{"role": "system", "content": "T"}, {"role": "user", "content": "1"}],
        )
    )
    d = translate(
        request(
            model="test/adaptive",
            tools=[TOOL],
            messages=[{"role": "system", "content": "S"}, {"role": "user", "content": "1"}],
        )
    )
    assert a.prefix_hash == b.prefix_hash == prefix_hash("test/adaptive", a.body)
    assert len({a.prefix_hash, c.prefix_hash, d.prefix_hash}) == 3


def test_response_model_is_exactly_as_sent() -> None:
    t = translate(request(model=" Test/ADAPTIVE "))
    assert t.model.id == "test/adaptive"
    assert t.response_model == " Test/ADAPTIVE "


def test_client_cache_anywhere_stops_automatic_breakpoints() -> None:
    messages = [
        {"role": "system", "content": "S"},
        {
            "role": "user",
            "content": [{"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}}],
        },
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "c"},
    ]
    t = translate(request(model="test/adaptive", messages=messages))
    assert t.body["system"] == "S"
    assert t.body["messages"][-1]["content"] == "c"
    assert str(t.body).count("cache_control") == 1


def test_tool_result_cache_control_on_text_part_is_carried() -> None:
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "tool_calls": [_call("c1")]},
        {
            "role": "tool",
            "tool_call_id": "c1",
            "content": [{"type": "text", "text": "r", "cache_control": {"type": "ephemeral"}}],
        },
    ]
    t = translate(request(model="test/adaptive", messages=messages))
    result = t.body["messages"][2]["content"][0]
    assert result["content"] == [
        {"type": "text", "text": "r", "cache_control": {"type": "ephemeral"}}
    ]
    assert "cache_control" not in result


def test_empty_tool_result_sends_no_content() -> None:
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "tool_calls": [_call("c1")]},
        {"role": "tool", "tool_call_id": "c1", "content": ""},
    ]
    t = translate(request(messages=messages))
    assert t.body["messages"][2]["content"] == [{"type": "tool_result", "tool_use_id": "c1"}]


def test_messages_with_only_empty_text_are_refused_as_no_user_message() -> None:
    from ezat_common.errors import GatewayError

    with pytest.raises(GatewayError) as info:
        translate(request(messages=[{"role": "user", "content": ""}]))
    assert info.value.message == "messages: must contain at least one user message"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Expected `int | null`, got `str` - at `$.n`", "n: Expected `int`, got `str`"),
        (
            "Object missing required field `role` - at `$.messages[3]`",
            "messages[3].role: Field required",
        ),
        ("Object missing required field `model`", "model: Field required"),
        ("Expected `object`, got `array`", "request body: must be a JSON object"),
    ],
)
def test_located(text: str, message: str) -> None:
    assert located(text).message == message


def test_check_closed_accepts_closed_schemas_and_non_objects() -> None:
    check_closed({"type": "string"}, "s")
    check_closed(
        {"type": "array", "items": [{"type": "object", "additionalProperties": False}]}, "s"
    )
    check_closed(True, "s")


def _call(call_id: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "f", "arguments": "{}"}}


def test_minimal_counts_as_low_on_budget_models() -> None:
    t = translate(request(model="test/budget", reasoning_effort="minimal"))
    assert t.body["thinking"] == {"type": "enabled", "budget_tokens": 1024}


def test_impossible_budget_is_not_refused_when_a_forced_tool_drops_thinking() -> None:
    body = request(model="test/tiny", reasoning_effort="low", tools=[TOOL], tool_choice="required")
    t = translate(body)
    assert "thinking" not in t.body
    assert t.body["max_tokens"] == 1024


def test_budget_of_1025_tokens_is_the_smallest_that_thinks() -> None:
    t = translate(request(model="test/budget", reasoning_effort="max", max_tokens=1025))
    assert t.body["thinking"] == {"type": "enabled", "budget_tokens": 1024}
