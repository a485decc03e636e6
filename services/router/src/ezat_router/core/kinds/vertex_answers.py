"""What Vertex AI answers, in the Anthropic formats the router already reads (docs/routing.md,
"Deployment kinds", "Answers").

Vertex streams plain SSE with Anthropic's events (``SseParser`` reads it as it is). Its errors
come in two shapes: what Vertex itself refuses (credentials, quota, the URL) is Google's
``{"error": {"code", "message", "status"}}`` (a streaming method may wrap it in a one-element
list); what the model refuses is Anthropic's own error body, passed through. ``vertex_error``
turns the first into the status and Anthropic error body ``from_status`` maps as it would an
Anthropic deployment's, and leaves the second (and anything unreadable) unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from .answers import ErrorAnswer, error_body

# Google's canonical codes (google.rpc.Code) and the HTTP status each stands for here.
STATUS_OF_GOOGLE: dict[str, int] = {
    "INVALID_ARGUMENT": 400,  # relayed with Google's message
    "FAILED_PRECONDITION": 400,
    "OUT_OF_RANGE": 400,
    "UNAUTHENTICATED": 401,  # the deployment's credentials: marked sick, failover ("auth")
    "PERMISSION_DENIED": 403,
    "NOT_FOUND": 404,
    "ABORTED": 409,
    "ALREADY_EXISTS": 409,
    "RESOURCE_EXHAUSTED": 429,  # rests the deployment (cooldown)
    "INTERNAL": 500,
    "UNKNOWN": 500,
    "DATA_LOSS": 500,
    "NOT_IMPLEMENTED": 501,
    "UNAVAILABLE": 503,  # fails over before the first byte
    "DEADLINE_EXCEEDED": 504,
}

_decode = msgspec.json.Decoder(Any).decode


def vertex_error(status: int, headers: Mapping[str, str], body: bytes) -> ErrorAnswer:
    """A non-2xx Vertex answer as ``from_status`` reads an Anthropic one (``headers`` with
    lower-case names). The message is Google's own; Anthropic-shaped bodies are unchanged."""
    retry_after = headers.get("retry-after")
    error = _google_error(body)
    if error is None:
        return ErrorAnswer(status, body, retry_after)
    google = error.get("status")
    code = error.get("code")
    if isinstance(google, str) and google in STATUS_OF_GOOGLE:
        mapped = STATUS_OF_GOOGLE[google]
    elif isinstance(code, int) and 400 <= code <= 599:
        mapped = code
    else:
        mapped = status
    message = error.get("message")
    return ErrorAnswer(
        mapped, error_body(mapped, message if isinstance(message, str) else ""), retry_after
    )


def _google_error(body: bytes) -> dict[str, Any] | None:
    """The ``error`` object of a Google error body, or None (Anthropic's shape, or not JSON)."""
    try:
        document = _decode(body) if body else None
    except msgspec.DecodeError:
        return None
    if isinstance(document, list) and len(document) == 1:
        document = document[0]
    if not isinstance(document, dict) or document.get("type") == "error":
        return None
    error = document.get("error")
    return error if isinstance(error, dict) else None
