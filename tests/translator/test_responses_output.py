"""core.anthropic_to_responses: Anthropic Messages responses as OpenAI Responses API objects.

Golden cases under golden/responses_output/<case>/: in.json (the deployment's body), out.json
(the response object, pretty-printed for review) and out.sse (the same answer streamed:
test_responses_output_stream.py). UPDATE_GOLDEN=1 rewrites the expected files; review the diff
against docs/responses.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from ezat_translator.core.anthropic_to_responses import (
    ResponseEcho,
    ResponseMeta,
    Seal,
    to_response,
)
from openai.types.responses import Response
from support.anthropic_streams import FINISH
from support.golden import assert_golden
from support.responses_sse import visible_seal

GOLDEN = Path(__file__).parent / "golden" / "responses_output"
CASES = sorted(p for p in GOLDEN.iterdir() if p.is_dir())
META = ResponseMeta(
    request_id="req_0123456789", response_model="anthropic/claude-sonnet-5-5", created_at=1793318400
)


def pretty(value: Any) -> str:
    return msgspec.json.format(msgspec.json.encode(value), indent=2).decode() + "\n"


def translate(
    body: dict[str, Any], meta: ResponseMeta = META, seal: Seal | None = visible_seal
) -> dict[str, Any]:
    out: dict[str, Any] = msgspec.json.decode(to_response(msgspec.json.encode(body), meta, seal))
    return out


def anthropic_message(
    content: list[dict[str, Any]], stop_reason: str | None = "end_turn", **usage: int
) -> dict[str, Any]:
    counts = {"input_tokens": 10, "output_tokens": 5}
    counts.update(usage)
    return {"type": "message", "content": content, "stop_reason": stop_reason, "usage": counts}


# ---- goldens --------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_response_matches_golden(case: Path) -> None:
    out = to_response((case / "in.json").read_bytes(), META, visible_seal)
    assert_golden(case / "out.json", pretty(msgspec.json.decode(out)))


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_the_sdk_reads_the_response(case: Path) -> None:
    body = json.loads((case / "in.json").read_text())
    response = Response.model_validate(translate(body))
    texts = [b["text"] for b in body["content"] if b["type"] == "text"]
    assert response.output_text == "".join(texts)
    assert response.id == "resp_req_0123456789"
    assert response.model == "anthropic/claude-sonnet-5-5"


# ---- one output item per block type -----------------------------------------------------------

SEALED = visible_seal([{"type": "thinking", "thinking": "hmm", "signature": "sig"}])
ITEMS: list[tuple[str, dict[str, Any], list[dict[str, Any]]]] = [
    (
        "text",
        {"type": "text", "text": "Hi."},
        [
            {
                "id": "msg_req_0123456789_0",
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Hi.", "annotations": []}],
            }
        ],
    ),
    (
        "tool_use",
        {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": [1, "é"]}},
        [
            {
                "id": "fc_toolu_1",
                "type": "function_call",
                "status": "completed",
                "call_id": "toolu_1",
                "name": "f",
                "arguments": '{"a":[1,"é"]}',
            }
        ],
    ),
    (
        "tool_use without input",
        {"type": "tool_use", "id": "toolu_2", "name": "g"},
        [
            {
                "id": "fc_toolu_2",
                "type": "function_call",
                "status": "completed",
                "call_id": "toolu_2",
                "name": "g",
                "arguments": "{}",
            }
        ],
    ),
    (
        "thinking",
        {"type": "thinking", "thinking": "hmm", "signature": "sig"},
        [
            {
                "id": "rs_req_0123456789_0",
                "type": "reasoning",
                "summary": [],
                "encrypted_content": SEALED,
            }
        ],
    ),
    (
        "redacted_thinking",
        {"type": "redacted_thinking", "data": "Blob=="},
        [
            {
                "id": "rs_req_0123456789_0",
                "type": "reasoning",
                "summary": [],
                "encrypted_content": visible_seal(
                    [{"type": "redacted_thinking", "data": "Blob=="}]
                ),
            }
        ],
    ),
    ("server_tool_use", {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search"}, []),
    ("a search result without its search", {"type": "web_search_tool_result", "content": []}, []),
]


@pytest.mark.parametrize(("block", "items"), [c[1:] for c in ITEMS], ids=[c[0] for c in ITEMS])
def test_each_block_type_gives_its_item(block: dict[str, Any], items: list[dict[str, Any]]) -> None:
    out = translate(anthropic_message([block]))
    assert out["output"] == items
    Response.model_validate(out)


def test_without_a_seal_reasoning_items_carry_nothing_of_the_thinking() -> None:
    body = anthropic_message([{"type": "thinking", "thinking": "secret plan", "signature": "s"}])
    out = translate(body, seal=None)
    assert out["output"] == [{"id": "rs_req_0123456789_0", "type": "reasoning", "summary": []}]
    assert b"secret plan" not in to_response(msgspec.json.encode(body), META)


def test_item_ids_count_output_items_not_blocks() -> None:
    body = anthropic_message(
        [
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search"},
            {"type": "text", "text": "a"},
            {"type": "thinking", "thinking": "t", "signature": "s"},
        ]
    )
    assert [i["id"] for i in translate(body)["output"]] == [
        "msg_req_0123456789_0",
        "rs_req_0123456789_1",
    ]


# ---- status, usage, echo --------------------------------------------------------------------

INCOMPLETE = {"length": "max_output_tokens", "content_filter": "content_filter"}


@pytest.mark.parametrize("stop_reason", FINISH)
def test_status_follows_the_finish_reason(stop_reason: str | None) -> None:
    out = translate(anthropic_message([{"type": "text", "text": "x"}], stop_reason))
    reason = INCOMPLETE.get(FINISH[stop_reason])
    if reason is None:
        assert (out["status"], out["incomplete_details"]) == ("completed", None)
    else:
        assert (out["status"], out["incomplete_details"]) == ("incomplete", {"reason": reason})


def test_max_tokens_is_incomplete_for_max_output_tokens() -> None:
    out = translate(anthropic_message([{"type": "text", "text": "One, two"}], "max_tokens"))
    assert out["status"] == "incomplete"
    assert out["incomplete_details"] == {"reason": "max_output_tokens"}


USAGE: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    (
        "uncached",
        {"input_tokens": 27, "output_tokens": 20},
        {"input": 27, "cached": 0, "write": 0, "output": 20, "reasoning": 0},
    ),
    (
        "cache read and write count as input",
        {
            "input_tokens": 7,
            "output_tokens": 20,
            "cache_read_input_tokens": 100,
            "cache_creation_input_tokens": 30,
        },
        {"input": 137, "cached": 100, "write": 30, "output": 20, "reasoning": 0},
    ),
    (
        "per-TTL cache writes only",
        {
            "input_tokens": 7,
            "output_tokens": 1,
            "cache_creation": {"ephemeral_5m_input_tokens": 3, "ephemeral_1h_input_tokens": 4},
        },
        {"input": 14, "cached": 0, "write": 7, "output": 1, "reasoning": 0},
    ),
    (
        "the deployment's reasoning count wins",
        {"input_tokens": 1, "output_tokens": 50, "reasoning_tokens": 33},
        {"input": 1, "cached": 0, "write": 0, "output": 50, "reasoning": 33},
    ),
]


@pytest.mark.parametrize(("usage", "want"), [c[1:] for c in USAGE], ids=[c[0] for c in USAGE])
def test_usage(usage: dict[str, Any], want: dict[str, int]) -> None:
    out = translate({"content": [{"type": "text", "text": "x"}], "usage": usage})
    assert out["usage"] == {
        "input_tokens": want["input"],
        "input_tokens_details": {
            "cached_tokens": want["cached"],
            "cache_write_tokens": want["write"],
        },
        "output_tokens": want["output"],
        "output_tokens_details": {"reasoning_tokens": want["reasoning"]},
        "total_tokens": want["input"] + want["output"],
    }


def test_reasoning_tokens_are_estimated_from_the_thinking_text_as_chat_does() -> None:
    thinking = {"type": "thinking", "thinking": "x" * 41, "signature": "s"}
    out = translate(anthropic_message([thinking], output_tokens=100))
    assert out["usage"]["output_tokens_details"] == {"reasoning_tokens": 11}  # ceil(41 / 4)
    capped = translate(anthropic_message([thinking], output_tokens=3))
    assert capped["usage"]["output_tokens_details"] == {"reasoning_tokens": 3}


def test_the_request_is_echoed() -> None:
    tools = [{"type": "function", "name": "f", "parameters": {"type": "object"}, "strict": True}]
    echo = ResponseEcho(
        instructions="Be brief.",
        max_output_tokens=64,
        parallel_tool_calls=False,
        temperature=0.5,
        top_p=0.9,
        tool_choice="required",
        tools=tools,
        reasoning={"effort": "low", "summary": None},
        metadata={"team": "a"},
        store=False,
    )
    meta = ResponseMeta(
        request_id="r", response_model="Claude-Sonnet-5.5 ", created_at=1, echo=echo
    )
    out = translate(anthropic_message([{"type": "text", "text": "x"}]), meta)
    assert out["model"] == "Claude-Sonnet-5.5 "
    assert {k: out[k] for k in ("instructions", "max_output_tokens", "parallel_tool_calls")} == {
        "instructions": "Be brief.",
        "max_output_tokens": 64,
        "parallel_tool_calls": False,
    }
    assert (out["temperature"], out["top_p"], out["tool_choice"], out["tools"]) == (
        0.5,
        0.9,
        "required",
        tools,
    )
    assert (out["reasoning"], out["metadata"], out["store"]) == (
        {"effort": "low", "summary": None},
        {"team": "a"},
        False,
    )
    response = Response.model_validate(out)
    assert response.tools[0].type == "function"
