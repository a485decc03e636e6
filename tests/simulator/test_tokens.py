"""Token model: 4-character output tokens and ceil(chars/4) input tokens."""

from __future__ import annotations

from typing import Any

import pytest
from ezat_simulator.tokens import (
    IMAGE_TOKENS,
    VOCAB,
    measure,
    reply_text,
    seed_of,
    tokens_for_chars,
)


def test_vocabulary_is_64_distinct_four_character_tokens() -> None:
    assert len(VOCAB) == 64 == len(set(VOCAB))
    assert all(len(t) == 4 and t[0] == " " and t[1:].isalpha() for t in VOCAB)


@pytest.mark.parametrize(
    ("chars", "tokens"), [(0, 0), (1, 1), (4, 1), (5, 2), (8, 2), (4001, 1001)]
)
def test_tokens_for_chars_rounds_up(chars: int, tokens: int) -> None:
    assert tokens_for_chars(chars) == tokens


@pytest.mark.parametrize("n", [0, 1, 12, 4095, 4096, 4097, 10_000])
def test_reply_has_exactly_four_characters_per_token(n: int) -> None:
    text = reply_text(seed_of("hello"), n)
    assert len(text) == 4 * n
    assert all(text[i : i + 4] in VOCAB for i in range(0, len(text), 4))


def test_reply_is_deterministic_and_depends_on_the_seed() -> None:
    assert reply_text(seed_of("a"), 30) == reply_text(seed_of("a"), 30)
    assert reply_text(seed_of("a"), 30) != reply_text(seed_of("b"), 30)
    # A longer reply starts like the shorter one.
    assert reply_text(seed_of("a"), 40).startswith(reply_text(seed_of("a"), 30))


def _user(content: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": content}]}


TOOL = {"name": "w", "input_schema": {"type": "object"}}
TOOL_CHARS = len('{"name":"w","input_schema":{"type":"object"}}')

MEASURE_CASES = [
    ("string content", _user("12345678"), 2),
    ("rounds up", _user("123456789"), 3),
    (
        "text blocks add up",
        _user([{"type": "text", "text": "ab"}, {"type": "text", "text": "cd"}]),
        1,
    ),
    ("system string", {**_user("1234"), "system": "5678"}, 2),
    ("system blocks", {**_user("1234"), "system": [{"type": "text", "text": "5678"}]}, 2),
    (
        "image is a fixed 1000 tokens",
        _user(
            [
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": "x"},
                }
            ]
        ),
        IMAGE_TOKENS,
    ),
    ("tool JSON", {**_user(""), "tools": [TOOL]}, -(-TOOL_CHARS // 4)),
    (
        "tool JSON ignores cache_control",
        {**_user(""), "tools": [{**TOOL, "cache_control": {"type": "ephemeral"}}]},
        -(-TOOL_CHARS // 4),
    ),
    (
        "tool_use is name plus input JSON",
        {
            "model": "m",
            "messages": [
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "t", "name": "ab", "input": {"k": 1}}],
                }
            ],
        },
        3,  # 'ab{"k":1}' is 9 characters
    ),
    (
        "tool_result nested text",
        _user(
            [
                {
                    "type": "tool_result",
                    "tool_use_id": "t",
                    "content": [{"type": "text", "text": "12345"}],
                }
            ]
        ),
        2,
    ),
    ("text document", _user([{"type": "document", "source": {"type": "text", "data": "1234"}}]), 1),
]


@pytest.mark.parametrize(
    ("req", "expected"), [c[1:] for c in MEASURE_CASES], ids=[c[0] for c in MEASURE_CASES]
)
def test_input_tokens(req: dict[str, Any], expected: int) -> None:
    assert measure(req, "m").input_tokens == expected


def _cached_request() -> dict[str, Any]:
    return {
        "model": "m",
        "system": [
            {"type": "text", "text": "s" * 40, "cache_control": {"type": "ephemeral", "ttl": "1h"}}
        ],
        "messages": [
            {"role": "user", "content": "u" * 8},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "a" * 4, "cache_control": {"type": "ephemeral"}}
                ],
            },
        ],
    }


def test_no_breakpoint_means_no_boundaries() -> None:
    assert measure(_user("hello"), "m").boundaries == ()


def test_boundaries_count_the_prefix_up_to_each_block() -> None:
    m = measure(_cached_request(), "m")
    assert [b.tokens for b in m.boundaries] == [10, 12, 13]
    assert [b.ttl for b in m.boundaries] == ["1h", None, "5m"]
    assert m.boundaries[-1].tokens == m.input_tokens


def test_prefix_digests_depend_on_model_and_content_only() -> None:
    base = measure(_cached_request(), "m").boundaries
    assert measure(_cached_request(), "other").boundaries[0].digest != base[0].digest
    moved = _cached_request()
    del moved["system"][0]["cache_control"]
    moved["messages"][0]["content"] = [
        {"type": "text", "text": "u" * 8, "cache_control": {"type": "ephemeral"}}
    ]
    # Moving a breakpoint does not change what the prefix is.
    assert [b.digest for b in measure(moved, "m").boundaries] == [b.digest for b in base]
    changed = _cached_request()
    changed["messages"][0]["content"] = "v" * 8
    after = measure(changed, "m").boundaries
    assert after[0].digest == base[0].digest and after[1].digest != base[1].digest
