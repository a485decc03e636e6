"""The catalogue and helpers shared by the tests of ``core/openai_to_anthropic``."""

from __future__ import annotations

import base64
from typing import Any

import msgspec
from ezat_common.catalogue import Catalogue
from ezat_common.config import parse_config
from ezat_translator.core.openai_to_anthropic import ChatTranslation, to_messages_request

CATALOGUE = Catalogue(
    parse_config(
        """
[[models]]
id = "test/adaptive"
aliases = ["adaptive", "adaptive-1.0"]
context_window = 200000
max_output_tokens = 64000
thinking = "adaptive"
effort_levels = ["low", "medium", "high", "xhigh", "max"]
price = { input = 3.0, output = 15.0 }

[[models]]
id = "test/adaptive-old"
context_window = 200000
max_output_tokens = 64000
thinking = "adaptive"
effort_levels = ["low", "medium", "high", "max"]
price = { input = 3.0, output = 15.0 }

[[models]]
id = "test/budget"
context_window = 200000
max_output_tokens = 128000
sampling = true
thinking = "budget"
effort_levels = ["low", "medium", "high", "xhigh", "max"]
price = { input = 1.0, output = 5.0 }

[[models]]
id = "test/budget-short"
context_window = 200000
max_output_tokens = 8192
thinking = "budget"
effort_levels = ["low", "medium", "high"]
price = { input = 1.0, output = 5.0 }

[[models]]
id = "test/tiny"
context_window = 8000
max_output_tokens = 1024
thinking = "budget"
effort_levels = ["low"]
price = { input = 1.0, output = 5.0 }

[[models]]
id = "test/plain"
context_window = 100000
max_output_tokens = 4096
sampling = true
prompt_caching = false
thinking = "none"
price = { input = 0.5, output = 1.0 }

[[models]]
id = "test/blind"
context_window = 100000
max_output_tokens = 4096
vision = false
pdf = false
structured_output = false
price = { input = 0.5, output = 1.0 }
"""
    )
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
