"""What every kind's answer normaliser returns (docs/routing.md, "Deployment kinds", "Answers").

A non-2xx answer of any kind becomes ``ErrorAnswer``: the status, an Anthropic error body and
the ``retry-after`` header, which ``upstream_errors.from_status`` then maps exactly as it maps an
Anthropic deployment's answer. ``bedrock_answers`` and ``vertex_answers`` each own one kind's
table; the anthropic kind needs none (``anthropic_error`` is the identity, for uniform
dispatch).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import msgspec
from ezat_common.errors import type_for_status


class ErrorAnswer(NamedTuple):
    status: int
    body: bytes  # ``{"type":"error","error":{"type","message"}}``, or the upstream's own bytes
    retry_after: str | None  # the ``retry-after`` header as received


def error_body(status: int, message: str) -> bytes:
    """An Anthropic error body with the type the Anthropic API gives ``status``."""
    return msgspec.json.encode(
        {"type": "error", "error": {"type": type_for_status(status), "message": message}}
    )


def anthropic_error(status: int, headers: Mapping[str, str], body: bytes) -> ErrorAnswer:
    """An Anthropic deployment's answer is already what ``from_status`` reads."""
    return ErrorAnswer(status, body, headers.get("retry-after"))
