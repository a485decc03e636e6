"""core.anthropic_to_openai: Anthropic Messages responses as OpenAI chat.completion objects.

Golden pairs under golden/anthropic_to_openai/<case>/: in.json (the deployment's body), out.json
(the completion, pretty-printed for review) and kept.json (the thinking kept, only when there is
some). UPDATE_GOLDEN=1 rewrites the expected files; review the diff against docs/api.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import openai.types.chat
import pytest
from ezat_translator.core.anthropic_to_openai import ThinkingKept, to_chat_completion
from ezat_translator.core.finish import FINISH_REASONS, to_finish_reason
from support.anthropic_streams import FINISH as DOCUMENTED_FINISH
from support.golden import assert_golden

GOLDEN = Path(__file__).parent / "golden" / "anthropic_to_openai"
CASES = sorted(p for p in GOLDEN.iterdir() if p.is_dir())
REQUEST_ID = "req_0123456789"
MODEL = "anthropic/claude-sonnet-5-5"
CREATED = 1793318400


def pretty(value: Any) -> str:
    return msgspec.json.format(msgspec.json.encode(value), indent=2).decode() + "\n"


def translate(body: Any, **overrides: Any) -> tuple[dict[str, Any], ThinkingKept | None]:
    raw = body if isinstance(body, bytes) else msgspec.json.encode(body)
    options: dict[str, Any] = {"request_id": REQUEST_ID, "response_model": MODEL}
    options.update(overrides)
    out, kept = to_chat_completion(raw, created=CREATED, **options)
    return msgspec.json.decode(out), kept


def anthropic_message(
    content: list[dict[str, Any]], stop_reason: str | None = "end_turn", **usage: int
) -> dict[str, Any]:
    counts = {"input_tokens": 10, "output_tokens": 5}
    counts.update(usage)
    return {
        "type": "message",
        "role": "assistant",
        "content": content,
        "stop_reason": stop_reason,
        "usage": counts,
    }


# ---- goldens --------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_completion_matches_golden(case: Path) -> None:
    out, kept = to_chat_completion(
        (case / "in.json").read_bytes(),
        request_id=REQUEST_ID,
        response_model=MODEL,
        created=CREATED,
    )
    assert_golden(case / "out.json", msgspec.json.format(out, indent=2).decode() + "\n")
    kept_path = case / "kept.json"
    if kept is None:
        assert not kept_path.exists()
    else:
        assert_golden(kept_path, pretty(kept))


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_completion_validates_with_the_openai_sdk(case: Path) -> None:
    out, _ = to_chat_completion(
        (case / "in.json").read_bytes(),
        request_id=REQUEST_ID,
        response_model=MODEL,
        created=CREATED,
    )
    completion = openai.types.chat.ChatCompletion.model_validate_json(out)
    assert completion.id == f"chatcmpl-{REQUEST_ID}"
    assert completion.object == "chat.completion"
    assert completion.model == MODEL
    assert completion.created == CREATED
    assert len(completion.choices) == 1
    choice = completion.choices[0]
    assert choice.index == 0
    assert choice.message.role == "assistant"
    assert choice.message.refusal is None
    assert choice.logprobs is None
    assert completion.usage is not None
    usage = completion.usage
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens


# ---- message ----------------------------------------------------------------------------------


def test_text_blocks_are_joined_and_tool_calls_absent() -> None:
    out, kept = translate(
        anthropic_message([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}])
    )
    message = out["choices"][0]["message"]
    assert message == {"role": "assistant", "content": "ab", "refusal": None}
    assert kept is None


def test_only_tool_calls_gives_null_content_and_json_arguments() -> None:
    tool = {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": [1, "é", None]}}
    out, _ = translate(anthropic_message([tool], "tool_use"))
    message = out["choices"][0]["message"]
    assert message["content"] is None
    assert message["tool_calls"] == [
        {
            "id": "toolu_1",
            "type": "function",
            "function": {"name": "f", "arguments": '{"a":[1,"é",null]}'},
        }
    ]
    assert out["choices"][0]["finish_reason"] == "tool_calls"


def test_no_blocks_at_all_gives_empty_content() -> None:
    out, _ = translate(anthropic_message([], "max_tokens"))
    assert out["choices"][0]["message"]["content"] == ""


def test_thinking_text_never_appears() -> None:
    secret = "SECRET-THOUGHT"
    out, kept = translate(
        anthropic_message(
            [
                {"type": "thinking", "thinking": secret, "signature": "s"},
                {"type": "text", "text": "hi"},
            ]
        )
    )
    assert secret not in msgspec.json.encode(out).decode()
    assert kept is None  # no tool call: nothing to keep for a next turn


def test_thinking_of_a_tool_turn_is_kept_in_order() -> None:
    blocks = [
        {"type": "thinking", "thinking": "one", "signature": "s1"},
        {"type": "redacted_thinking", "data": "blob"},
        {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}},
        {"type": "tool_use", "id": "toolu_2", "name": "g", "input": {}},
    ]
    _, kept = translate(anthropic_message(blocks, "tool_use"))
    assert kept == ThinkingKept(tool_call_ids=["toolu_1", "toolu_2"], blocks=blocks[:2])


def test_request_id_and_model_are_echoed() -> None:
    out, _ = translate(
        anthropic_message([]), request_id="abc.DEF:1-2", response_model="Claude-Sonnet-5.5 "
    )
    assert out["id"] == "chatcmpl-abc.DEF:1-2"
    assert out["model"] == "Claude-Sonnet-5.5 "


def test_undeclared_block_types_are_skipped() -> None:
    out, _ = translate(
        anthropic_message([{"type": "mystery", "x": 1}, {"type": "text", "text": "ok"}])
    )
    assert out["choices"][0]["message"]["content"] == "ok"


def test_a_body_that_is_not_a_response_raises() -> None:
    with pytest.raises(msgspec.DecodeError):
        translate(b"not json")


# ---- usage ------------------------------------------------------------------------------------


def test_prompt_tokens_count_uncached_read_and_write() -> None:
    out, _ = translate(
        anthropic_message(
            [],
            input_tokens=7,
            cache_read_input_tokens=100,
            cache_creation_input_tokens=30,
            output_tokens=9,
        )
    )
    assert out["usage"] == {
        "prompt_tokens": 137,
        "completion_tokens": 9,
        "total_tokens": 146,
        "prompt_tokens_details": {"cached_tokens": 100, "cache_write_tokens": 30},
        "completion_tokens_details": {"reasoning_tokens": 0},
    }


def test_cache_write_falls_back_to_the_ttl_breakdown() -> None:
    body = anthropic_message([])
    body["usage"]["cache_creation"] = {
        "ephemeral_5m_input_tokens": 3,
        "ephemeral_1h_input_tokens": 4,
    }
    out, _ = translate(body)
    assert out["usage"]["prompt_tokens_details"]["cache_write_tokens"] == 7
    assert out["usage"]["prompt_tokens"] == 17


@pytest.mark.parametrize(
    ("chars", "output", "expected"),
    [(0, 10, 0), (1, 10, 1), (4, 10, 1), (5, 10, 2), (400, 10, 10), (8, 0, 0)],
)
def test_reasoning_tokens_estimated_from_thinking_chars(
    chars: int, output: int, expected: int
) -> None:
    block = {"type": "thinking", "thinking": "x" * chars, "signature": ""}
    out, _ = translate(anthropic_message([block], output_tokens=output))
    assert out["usage"]["completion_tokens_details"]["reasoning_tokens"] == expected


def test_reported_reasoning_tokens_win_over_the_estimate() -> None:
    block = {"type": "thinking", "thinking": "x" * 400, "signature": ""}
    out, _ = translate(anthropic_message([block], output_tokens=50, reasoning_tokens=3))
    assert out["usage"]["completion_tokens_details"]["reasoning_tokens"] == 3


# ---- finish reasons ---------------------------------------------------------------------------


@pytest.mark.parametrize(("stop_reason", "finish_reason"), DOCUMENTED_FINISH.items())
def test_finish_reason_mapping(stop_reason: str | None, finish_reason: str) -> None:
    assert to_finish_reason(stop_reason) == finish_reason
    out, _ = translate(anthropic_message([{"type": "text", "text": "x"}], stop_reason))
    assert out["choices"][0]["finish_reason"] == finish_reason
    assert out["choices"][0]["message"]["refusal"] is None


def test_every_known_stop_reason_is_in_the_spec_table() -> None:
    assert {k: v for k, v in DOCUMENTED_FINISH.items() if k in FINISH_REASONS} == FINISH_REASONS
