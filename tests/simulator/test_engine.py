"""The reply plan: directives, lengths, thinking, tool calls, caps and stop reasons."""

from __future__ import annotations

import re
from typing import Any

import pytest
from ezat_simulator.cache import NO_CACHE, CacheUsage
from ezat_simulator.engine import (
    NO_DIRECTIVES,
    Directives,
    TextPart,
    ThinkingPart,
    ToolPart,
    example_value,
    parse_directives,
    plan_reply,
    read_directives,
    to_message,
)
from ezat_simulator.tokens import VOCAB
from ezat_simulator.validate import InvalidRequest


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("hello", NO_DIRECTIVES),
        ("[sim:tokens=5]", Directives(tokens=5)),
        ("a [sim:think tokens=3, refuse] b", Directives(think=8, tokens=3, refuse=True)),
        ("[sim:think=4][sim:tool=get_weather]", Directives(think=4, tool="get_weather")),
        ("[sim:status=529]", Directives(status=529)),
        ("[sim:fail_after=2 drop_after=0]", Directives(fail_after=2, drop_after=0)),
        ("[sim:first_token_ms=2.5 token_ms=0]", Directives(first_token_ms=2.5, token_ms=0.0)),
        ("[sim:stop=END]", Directives(stop="END")),
        ("[sim:stall_after=3]", Directives(stall_after=3)),
        ("[sim:never_answer html]", Directives(never_answer=True, html=True)),
        ("[sim:web_search=3 web_fetch=0]", Directives(web_search=3, web_fetch=0)),
        ("[sim:]", NO_DIRECTIVES),
    ],
)
def test_directives_are_parsed(text: str, expected: Directives) -> None:
    assert parse_directives(text) == expected


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[sim:bogus]", "is not a simulator directive"),
        ("[sim:tokens=x]", "expects a whole number"),
        ("[sim:tokens]", "expects a whole number"),
        ("[sim:status=200]", "expects an HTTP error status"),
        ("[sim:token_ms=-1]", "expects milliseconds"),
        ("[sim:tool=]", "expects a value"),
        ("[sim:html=1]", "takes no value"),
        ("[sim:stall_after=-1]", "expects a whole number"),
        ("[sim:web_search]", "expects a whole number"),
        ("[sim:web_fetch=-2]", "expects a whole number"),
    ],
)
def test_bad_directives_are_refused_with_the_message_path(text: str, problem: str) -> None:
    with pytest.raises(
        InvalidRequest, match=r"^messages\.0\.content: " + re.escape(text) + " " + problem
    ):
        read_directives({"messages": [{"role": "user", "content": text}]})


def test_directives_come_from_the_last_user_message() -> None:
    req = {
        "messages": [
            {"role": "user", "content": "[sim:tokens=1]"},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": [{"type": "text", "text": "[sim:tokens=2]"}]},
            {"role": "assistant", "content": "prefill"},
        ]
    }
    assert read_directives(req)[0] == Directives(tokens=2)


def _req(text: str = "hi", **extra: Any) -> dict[str, Any]:
    return {
        "model": "claude-x",
        "max_tokens": 1000,
        "messages": [{"role": "user", "content": text}],
        **extra,
    }


def _plan(req: dict[str, Any], cache: CacheUsage = NO_CACHE, input_tokens: int = 100) -> Any:
    directives, seed = read_directives(req)
    return plan_reply(req, directives, seed, seq=7, input_tokens=input_tokens, cache=cache)


WEATHER = {
    "name": "get_weather",
    "input_schema": {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "days": {"type": "integer"},
            "metric": {"type": "boolean"},
        },
        "required": ["city", "days", "metric"],
    },
}


def test_default_reply_is_twelve_four_character_tokens() -> None:
    plan = _plan(_req())
    assert plan.message_id == "msg_sim_7" and plan.model == "claude-x"
    (part,) = plan.parts
    assert isinstance(part, TextPart) and len(part.text) == 48
    assert all(part.text[i : i + 4] in VOCAB for i in range(0, 48, 4))
    assert (plan.stop_reason, plan.stop_sequence) == ("end_turn", None)
    assert plan.usage.output_tokens == 12 and plan.usage.reasoning_tokens == 0


def test_reply_is_deterministic_per_last_user_message() -> None:
    assert _plan(_req("a")).parts == _plan(_req("a")).parts
    assert _plan(_req("a")).parts != _plan(_req("b")).parts


@pytest.mark.parametrize(
    ("text", "max_tokens", "tokens", "stop"),
    [
        ("[sim:tokens=50]", 1000, 50, "end_turn"),
        ("[sim:tokens=50]", 20, 20, "max_tokens"),
        ("hi", 5, 5, "max_tokens"),
        ("[sim:tokens=5 refuse]", 100, 5, "refusal"),
    ],
)
def test_length_and_cap(text: str, max_tokens: int, tokens: int, stop: str) -> None:
    plan = _plan(_req(text) | {"max_tokens": max_tokens})
    assert len(plan.parts[0].text) == 4 * tokens
    assert plan.stop_reason == stop and plan.usage.output_tokens == tokens


def test_stop_directive_sets_the_stop_sequence() -> None:
    plan = _plan(_req("[sim:stop=END]"))
    assert (plan.stop_reason, plan.stop_sequence) == ("stop_sequence", "END")


@pytest.mark.parametrize(
    "req",
    [
        _req(thinking={"type": "enabled", "budget_tokens": 1024}) | {"max_tokens": 2000},
        _req(thinking={"type": "adaptive"}),
        _req("[sim:think]"),
    ],
)
def test_thinking_block_comes_first_with_a_signature(req: dict[str, Any]) -> None:
    plan = _plan(req)
    thinking, text = plan.parts
    assert isinstance(thinking, ThinkingPart) and isinstance(text, TextPart)
    assert len(thinking.text) == 32 and thinking.signature.startswith("sim_sig_")
    assert plan.usage.reasoning_tokens == 8 and plan.usage.output_tokens == 20


def test_thinking_disabled_gives_no_thinking_block() -> None:
    assert len(_plan(_req(thinking={"type": "disabled"})).parts) == 1


@pytest.mark.parametrize(
    "choice",
    [{"type": "any"}, {"type": "tool", "name": "get_weather"}],
)
def test_forced_tool_choice_calls_the_tool(choice: dict[str, Any]) -> None:
    plan = _plan(_req(tools=[WEATHER, {"name": "other", "input_schema": {}}], tool_choice=choice))
    (tool,) = plan.parts
    assert isinstance(tool, ToolPart)
    assert (tool.id, tool.name) == ("toolu_sim_7", "get_weather")
    assert tool.input == {"city": "Oslo", "days": 1, "metric": True}
    assert tool.json == '{"city":"Oslo","days":1,"metric":true}'
    assert plan.stop_reason == "tool_use"
    assert plan.usage.output_tokens == -(-len(tool.json) // 4)


def test_tool_directive_with_text_then_tool() -> None:
    plan = _plan(_req("[sim:tool=get_weather tokens=3]", tools=[WEATHER]))
    text, tool = plan.parts
    assert isinstance(text, TextPart) and isinstance(tool, ToolPart) and len(text.text) == 12
    assert plan.usage.output_tokens == 3 + tool.tokens


def test_tool_choice_none_ignores_the_tool_directive() -> None:
    plan = _plan(_req("[sim:tool=get_weather]", tools=[WEATHER], tool_choice={"type": "none"}))
    assert plan.stop_reason == "end_turn" and isinstance(plan.parts[0], TextPart)


def test_tool_call_that_does_not_fit_is_left_out() -> None:
    plan = _plan(_req("[sim:tool=get_weather]", tools=[WEATHER]) | {"max_tokens": 3})
    assert plan.parts == () and plan.stop_reason == "max_tokens"


@pytest.mark.parametrize(
    ("schema", "value"),
    [
        ({"type": "string"}, "Oslo"),
        ({"type": "number"}, 1),
        ({"type": ["integer", "null"]}, 1),
        ({"type": "array", "items": {}}, []),
        ({"enum": ["c", "f"]}, "c"),
        (
            {
                "type": "object",
                "properties": {
                    "a": {
                        "type": "object",
                        "properties": {"b": {"type": "boolean"}},
                        "required": ["b"],
                    }
                },
                "required": ["a"],
            },
            {"a": {"b": True}},
        ),
        ({"type": "object", "properties": {"a": {"type": "string"}}}, {}),
    ],
)
def test_tool_input_examples(schema: dict[str, Any], value: Any) -> None:
    assert example_value(schema) == value


def test_usage_splits_input_between_uncached_read_and_written() -> None:
    plan = _plan(_req(), cache=CacheUsage(read=1000, write_5m=300, write_1h=200), input_tokens=1600)
    assert plan.usage.final() == {
        "input_tokens": 100,
        "cache_creation_input_tokens": 500,
        "cache_read_input_tokens": 1000,
        "cache_creation": {"ephemeral_5m_input_tokens": 300, "ephemeral_1h_input_tokens": 200},
        "output_tokens": 12,
        "reasoning_tokens": 0,
    }


@pytest.mark.parametrize(
    ("text", "reported"),
    [
        ("[sim:web_search=3]", {"web_search_requests": 3, "web_fetch_requests": 0}),
        ("[sim:web_fetch=2]", {"web_search_requests": 0, "web_fetch_requests": 2}),
        ("[sim:web_search=1 web_fetch=4]", {"web_search_requests": 1, "web_fetch_requests": 4}),
    ],
)
def test_server_tool_directives_are_reported_in_the_final_usage(
    text: str, reported: dict[str, int]
) -> None:
    # Both counts, as Anthropic's ServerToolUsage always has them.
    plan = _plan(_req(text))
    assert plan.usage.final()["server_tool_use"] == reported
    assert to_message(plan)["usage"]["server_tool_use"] == reported
    assert "server_tool_use" not in plan.usage.input_fields()  # not in message_start


def test_without_server_tool_directives_usage_has_no_server_tool_use() -> None:
    assert "server_tool_use" not in _plan(_req()).usage.final()


def test_message_body() -> None:
    plan = _plan(_req("[sim:think=2 tokens=2]"))
    body = to_message(plan)
    assert body["type"] == "message" and body["role"] == "assistant" and body["id"] == "msg_sim_7"
    assert [b["type"] for b in body["content"]] == ["thinking", "text"]
    assert body["content"][0]["signature"] == plan.parts[0].signature
    assert body["usage"]["output_tokens"] == 4
