"""What a stored response keeps of its turn (core/stored_turns.py) and how a continuation reads it
back (responses_items ``seed``): canonical Messages turns, never the client's raw items; thinking
only sealed; stored blocks held to this request's model like its own input."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from ezat_common.errors import GatewayError
from ezat_translator.core.responses_to_anthropic import (
    ResponsesTranslation,
    decode_responses_request,
    translate_request,
)
from ezat_translator.core.stored_turns import SEALED, assistant_turn

from .openai_to_anthropic_support import CATALOGUE
from .responses_request_support import restore_thinking

PNG_URL = "https://images.example/cat.png"


def run(body: dict[str, Any], earlier: list[dict[str, Any]] | None = None) -> ResponsesTranslation:
    return translate_request(
        decode_responses_request(msgspec.json.encode(body)),
        CATALOGUE,
        session_header=None,
        cache_header=None,
        open_reasoning=restore_thinking,
        earlier=earlier,
        open_stored=restore_thinking,
    )


def stored(tr: ResponsesTranslation) -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = msgspec.json.decode(tr.new_turns)
    return turns


def test_a_turn_keeps_what_the_translation_used_and_thinking_only_sealed() -> None:
    tr = run(
        {
            "model": "test/adaptive",
            "instructions": "Be brief.",
            "input": [
                {"role": "developer", "content": "Use metric units."},
                {"role": "user", "content": "Weather?", "junk": "j" * 1000},
                {"type": "reasoning", "id": "rs_0", "summary": [], "junk": "r" * 1000},
                {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "BLOB"},
                {"role": "assistant", "content": [{"type": "output_text", "text": "Sunny."}]},
                {"role": "user", "content": [{"type": "input_text", "text": ""}]},
                {"role": "user", "content": "Thanks."},
            ],
        }
    )
    assert stored(tr) == [
        # instructions are not carried over (sent again each turn); developer text is.
        {"role": "system", "content": [{"type": "text", "text": "Use metric units."}]},
        {"role": "user", "content": [{"type": "text", "text": "Weather?"}]},
        {
            "role": "assistant",
            "content": [{"type": SEALED, "data": "BLOB"}, {"type": "text", "text": "Sunny."}],
        },
        {"role": "user", "content": [{"type": "text", "text": "Thanks."}]},
    ]
    assert b"jjj" not in tr.new_turns and b"thought at" not in tr.new_turns


def test_the_answer_turn_keeps_text_calls_and_sealed_thinking_in_order() -> None:
    output = [
        {"type": "reasoning", "id": "rs", "summary": [], "encrypted_content": "B1"},
        {"type": "message", "content": [{"type": "output_text", "text": "Let me look."}]},
        {"type": "function_call", "call_id": "c1", "name": "spawn", "namespace": "ns",
         "arguments": "{\"a\": 1}"},
        {"type": "custom_tool_call", "call_id": "c2", "name": "patch", "input": "*** Begin"},
        {"type": "function_call", "call_id": "c3", "name": "cut", "arguments": "{\"a\": "},
        {"type": "reasoning", "id": "rs2", "summary": []},
    ]  # fmt: skip
    assert assistant_turn(output) == {
        "role": "assistant",
        "content": [
            {"type": SEALED, "data": "B1"},
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "c1", "name": "ns__spawn", "input": {"a": 1}},
            {"type": "tool_use", "id": "c2", "name": "patch", "input": {"input": "*** Begin"}},
            {"type": "tool_use", "id": "c3", "name": "cut", "input": {}},
        ],
    }
    assert assistant_turn([{"type": "reasoning", "id": "rs", "summary": []}]) is None


def test_a_continuation_reads_the_stored_turns_first_and_keeps_only_its_own() -> None:
    first = run({"model": "test/adaptive", "input": "Weather? [c]"})
    answer = assistant_turn(
        [
            {"type": "reasoning", "encrypted_content": "B1"},
            {"type": "function_call", "call_id": "c1", "name": "get", "arguments": "{}"},
        ]
    )
    assert answer is not None
    earlier = [*stored(first), answer]
    output = {"type": "function_call_output", "call_id": "c1", "output": "sunny"}
    tr = run(
        {"model": "test/adaptive", "input": [output], "previous_response_id": "resp_x"}, earlier
    )
    messages = tr.body["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[1]["content"][0] == restore_thinking("B1", "previous_response_id")[0]
    assert stored(tr) == [
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1",
                                      "content": "sunny"}]},
    ]  # fmt: skip
    # A call the stored turns do not hold is refused, as in input.
    with pytest.raises(GatewayError) as err:
        run(
            {
                "model": "test/adaptive",
                "input": [{"type": "function_call_output", "call_id": "zz", "output": "x"}],
                "previous_response_id": "resp_x",
            },
            earlier,
        )
    assert err.value.param == "input[0].call_id"


def test_stored_blocks_are_held_to_this_requests_model() -> None:
    marked = {"type": "text", "text": "big doc", "cache_control": {"type": "ephemeral"}}
    earlier = [
        {"role": "user", "content": [marked]},
        {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
    ]
    cont = {"input": "next", "previous_response_id": "resp_x"}
    # A caching model: the client's own breakpoint stays, and no automatic ones join it.
    body = run({"model": "test/adaptive", **cont}, earlier).body
    assert msgspec.json.encode(body).count(b"cache_control") == 1
    # A model without caching: the breakpoint is dropped.
    body = run({"model": "test/plain", **cont}, earlier).body
    assert b"cache_control" not in msgspec.json.encode(body)
    # A stored image for a model without vision: refused, naming previous_response_id.
    image = {"type": "image", "source": {"type": "url", "url": PNG_URL}}
    with pytest.raises(GatewayError) as err:
        run({"model": "test/blind", **cont}, [{"role": "user", "content": [image]}])
    assert err.value.param == "previous_response_id"
    # With vision, a stored image URL is fetched again like the input's.
    tr = run({"model": "test/adaptive", **cont}, [{"role": "user", "content": [image]}])
    assert [(u.path, u.url, u.message_index) for u in tr.image_urls] == [
        ("previous_response_id", PNG_URL, 0)
    ]
