"""The count_tokens estimate (ezat_translator/core/token_estimate.py; docs/api.md,
"count_tokens"): one line per rule, and the property the estimate exists for, that it only
grows with the prompt."""

from __future__ import annotations

import base64
import json
from typing import Any

import msgspec
import pytest
from ezat_translator.core.messages import prepare_count
from ezat_translator.core.token_estimate import (
    BLOCK_TOKENS,
    IMAGE_TOKENS,
    MESSAGE_TOKENS,
    PDF_PAGE_TOKENS,
    TOOLS_TOKENS,
    input_estimate,
    text_tokens,
)
from hypothesis import given
from hypothesis import strategies as st
from support.config import catalogue, model
from support.image_headers import jpeg, png


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def user(*blocks: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": list(blocks)}]}


def image(data: bytes | None = None, kind: str = "base64") -> dict[str, Any]:
    if kind == "url":
        return {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}
    source = {"type": "base64", "media_type": "image/png", "data": b64(data or b"")}
    return {"type": "image", "source": source}


def pdf(pages: int) -> dict[str, Any]:
    body = b"%PDF-1.7\n" + b"".join(b"<< /Type /Page >>\n" for _ in range(pages))
    body += b"<< /Type /Pages /Count 2 >>\n"  # the page tree is not a page
    source = {"type": "base64", "media_type": "application/pdf", "data": b64(body)}
    return {"type": "document", "source": source}


ONE = MESSAGE_TOKENS + BLOCK_TOKENS  # one message of one block
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}}
CASES: list[tuple[str, dict[str, Any], int]] = [
    ("string content", {"messages": [{"role": "user", "content": "abcdef"}]}, 6 + 2),
    ("3 bytes a token, up", user({"type": "text", "text": "abcd"}), ONE + 2),
    ("CJK: a token a character", user({"type": "text", "text": "日本語"}), ONE + 3),
    ("system string", {"system": "x" * 9, "messages": []}, 3),
    ("system blocks", {"system": [{"type": "text", "text": "x" * 9}], "messages": []}, 4 + 3),
    ("thinking", user({"type": "thinking", "thinking": "x" * 30, "signature": "s"}), ONE + 10),
    (
        "tool_use input as JSON",
        user({"type": "tool_use", "id": "t", "name": "abc", "input": {"a": 1}}),
        ONE + 1 + 3,
    ),
    (
        "tool_result content",
        user(
            {
                "type": "tool_result",
                "tool_use_id": "t",
                "content": [{"type": "text", "text": "xxxxxx"}],
            }
        ),
        ONE + BLOCK_TOKENS + 2,
    ),
    (
        "a tool: name, description, schema JSON, and the tool-use prompt",
        {
            "tools": [{"name": "abc", "description": "x" * 6, "input_schema": SCHEMA}],
            "messages": [],
        },
        TOOLS_TOKENS + BLOCK_TOKENS + 1 + 2 + -(-len(msgspec.json.encode(SCHEMA)) // 3),
    ),
    ("image 750x750: 750 tokens", user(image(png(750, 750))), ONE + 750),
    ("image 1x1: 1 token", user(image(png(1, 1))), ONE + 1),
    ("image JPEG 100x75: 10 tokens", user(image(jpeg(100, 75))), ONE + 10),
    ("a large image: the cap", user(image(png(4000, 3000))), ONE + IMAGE_TOKENS),
    ("no header: the cap", user(image(b"not an image")), ONE + IMAGE_TOKENS),
    ("an image by URL: the cap", user(image(kind="url")), ONE + IMAGE_TOKENS),
    ("a PDF: its pages", user(pdf(3)), ONE + 3 * PDF_PAGE_TOKENS),
    (
        "a text document",
        user({"type": "document", "source": {"type": "text", "data": "x" * 9}}),
        ONE + 3,
    ),
    ("another block: its JSON", user({"type": "search_result", "x": "y"}), ONE + 11),
]


@pytest.mark.parametrize(("data", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_estimate_rule(data: dict[str, Any], expected: int) -> None:
    assert input_estimate(data) == expected


def test_a_compressed_pdf_counts_a_page_a_20_kb() -> None:
    data = b64(b"%PDF" + b"\0" * 50_000)
    source = {"type": "base64", "media_type": "application/pdf", "data": data}
    assert input_estimate(user({"type": "document", "source": source})) == ONE + 3 * PDF_PAGE_TOKENS


def test_prepare_count_carries_the_estimate() -> None:
    cat = catalogue(model("anthropic/m", aliases=["m"]))
    body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "abc"}]}
    prepared = prepare_count(json.dumps(body).encode(), cat)
    assert prepared.input_estimate == MESSAGE_TOKENS + 1


TEXT = st.text(max_size=200)
BLOCK = st.one_of(
    TEXT.map(lambda t: {"type": "text", "text": t}),
    TEXT.map(lambda t: {"type": "thinking", "thinking": t, "signature": "s"}),
    st.dictionaries(st.text(max_size=8), TEXT, max_size=3).map(
        lambda i: {"type": "tool_use", "id": "t", "name": "f", "input": i}
    ),
    TEXT.map(lambda t: {"type": "tool_result", "tool_use_id": "t", "content": t}),
)
MESSAGES = st.lists(
    st.fixed_dictionaries({"role": st.just("user"), "content": st.lists(BLOCK, max_size=4)}),
    max_size=4,
)


@given(messages=MESSAGES, system=TEXT, extra=TEXT, at=st.integers(min_value=0))
def test_adding_text_never_lowers_the_estimate(
    messages: list[dict[str, Any]], system: str, extra: str, at: int
) -> None:
    """Anywhere a text grows (the system prompt, or a new block in some message), the estimate
    does not shrink: the point of an estimate that must not undercount."""
    before = input_estimate({"system": system, "messages": messages})
    assert input_estimate({"system": system + extra, "messages": messages}) >= before
    grown = [dict(m, content=list(m["content"])) for m in messages] or [
        {"role": "user", "content": []}
    ]
    grown[at % len(grown)]["content"].append({"type": "text", "text": extra})
    assert input_estimate({"system": system, "messages": grown}) > before


@given(text=TEXT, extra=TEXT)
def test_text_tokens_grow_with_the_text(text: str, extra: str) -> None:
    size = len(text.encode("utf-8", "surrogatepass"))
    assert text_tokens(text + extra) >= text_tokens(text) >= size / 3
