"""The catalogue and helpers shared by the tests of ``core/openai_to_anthropic``."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import msgspec
from ezat_translator.core.openai_request import Translation
from ezat_translator.core.openai_to_anthropic import ChatTranslation, to_messages_request
from support.config import catalogue, model
from support.golden import assert_golden_json

ALL_EFFORTS = ["low", "medium", "high", "xhigh", "max"]
CHEAP = {"input": 1.0, "output": 5.0}
CHEAPEST = {"input": 0.5, "output": 1.0}
CATALOGUE = catalogue(
    model(
        "test/adaptive",
        aliases=["adaptive", "adaptive-1.0"],
        thinking="adaptive",
        effort_levels=ALL_EFFORTS,
    ),
    model("test/adaptive-old", thinking="adaptive", effort_levels=["low", "medium", "high", "max"]),
    model(
        "test/budget",
        max_output_tokens=128_000,
        sampling=True,
        thinking="budget",
        effort_levels=ALL_EFFORTS,
        price=CHEAP,
    ),
    model(
        "test/budget-short",
        max_output_tokens=8192,
        thinking="budget",
        effort_levels=["low", "medium", "high"],
        price=CHEAP,
    ),
    model(
        "test/tiny",
        context_window=8000,
        max_output_tokens=1024,
        thinking="budget",
        effort_levels=["low"],
        price=CHEAP,
    ),
    model(
        "test/plain",
        context_window=100_000,
        max_output_tokens=4096,
        sampling=True,
        prompt_caching=False,
        thinking="none",
        price=CHEAPEST,
    ),
    model(
        "test/blind",
        context_window=100_000,
        max_output_tokens=4096,
        vision=False,
        pdf=False,
        structured_output=False,
        price=CHEAPEST,
    ),
)

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 8
JPEG = b"\xff\xd8\xff\xe0" + b"\x00" * 8
GIF = b"GIF89a" + b"\x00" * 8
WEBP = b"RIFF\x10\x00\x00\x00WEBPVP8 " + b"\x00" * 4
PDF = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n"


def data_url(media_type: str, raw: bytes) -> str:
    return f"data:{media_type};base64,{base64.b64encode(raw).decode()}"


def translate(
    body: dict[str, Any] | bytes,
    *,
    session_header: str | None = None,
    cache_header: str | None = None,
) -> ChatTranslation:
    raw = body if isinstance(body, bytes) else msgspec.json.encode(body)
    return to_messages_request(
        raw, CATALOGUE, session_header=session_header, cache_header=cache_header
    )


def request(**fields: Any) -> dict[str, Any]:
    """A minimal valid request to the plain (no caching, no thinking) model, with overrides."""
    body: dict[str, Any] = {"model": "test/plain", "messages": [{"role": "user", "content": "hi"}]}
    body.update(fields)
    return body


def case_input(case: Path) -> tuple[bytes, dict[str, str | None]]:
    """A golden case's body (``in.json``) and the keyword arguments of its ``x-ezat-session`` and
    ``x-ezat-cache`` headers (``headers.json``, optional)."""
    headers_file = case / "headers.json"
    headers = json.loads(headers_file.read_text()) if headers_file.exists() else {}
    headers_of = {
        "session_header": headers.get("x-ezat-session"),
        "cache_header": headers.get("x-ezat-cache"),
    }
    return (case / "in.json").read_bytes(), headers_of


def translation_meta(t: Translation) -> dict[str, Any]:
    """The fields both OpenAI translations share, as a golden case's ``meta.json`` holds them."""
    return {
        "model": t.model.id,
        "response_model": t.response_model,
        "stream": t.stream,
        "session_key": t.session_key,
        "image_urls": msgspec.to_builtins(t.image_urls),
        "tool_turns": [[index, ids] for index, ids in t.tool_turns],
        "thinking_requested": t.thinking_requested,
        "cache_ttl": t.cache_ttl,
    }


def assert_translation_golden(case: Path, t: Translation, meta: dict[str, Any]) -> None:
    """The body (as the encoder sends it, without ``model``) is ``out.json``; ``meta`` is
    ``meta.json``."""
    body = msgspec.json.decode(msgspec.json.encode(t.body))
    assert "model" not in body
    assert_golden_json(case / "out.json", body)
    assert_golden_json(case / "meta.json", meta)
