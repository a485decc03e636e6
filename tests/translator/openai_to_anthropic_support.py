"""The catalogue and helpers shared by the tests of ``core/openai_to_anthropic``."""

from __future__ import annotations

import base64
from typing import Any

import msgspec
from ezat_translator.core.openai_to_anthropic import ChatTranslation, to_messages_request
from support.config import catalogue, model

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
