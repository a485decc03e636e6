"""Helpers shared by the tests of ``core/responses_to_anthropic``: the chat tests' catalogue and
media, a request builder and a stand-in for the reasoning hook."""

from __future__ import annotations

from typing import Any

import msgspec
from ezat_translator.core.responses_to_anthropic import (
    OpenReasoning,
    ResponsesTranslation,
    to_messages_request,
)

from .openai_to_anthropic_support import CATALOGUE


def restore_thinking(blob: str, path: str) -> list[dict[str, Any]]:
    """A reasoning hook that restores one thinking block per blob, signed with the blob."""
    return [{"type": "thinking", "thinking": f"thought at {path}", "signature": blob}]


def translate(
    body: dict[str, Any] | bytes,
    *,
    session_header: str | None = None,
    cache_header: str | None = None,
    open_reasoning: OpenReasoning | None = None,
) -> ResponsesTranslation:
    raw = body if isinstance(body, bytes) else msgspec.json.encode(body)
    return to_messages_request(
        raw,
        CATALOGUE,
        session_header=session_header,
        cache_header=cache_header,
        open_reasoning=open_reasoning,
    )


def request(**fields: Any) -> dict[str, Any]:
    """A minimal valid request to the plain (no caching, no thinking) model, with overrides."""
    body: dict[str, Any] = {"model": "test/plain", "input": "hi"}
    body.update(fields)
    return body


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": text}


def call(call_id: str, name: str = "f", arguments: str = "{}") -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments}


def output(call_id: str, text: str = "ok") -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": text}
