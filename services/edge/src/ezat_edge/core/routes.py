"""Which API a path belongs to, and what a request to no route is told (docs/openapi.yaml)."""

from __future__ import annotations

from ezat_common.errors import Format as Format

RESPONSES_PREFIX = "/openai/v1/responses"
# The model calls (app.py ROUTES, every POST): their answers are counted in
# ezat_edge_requests_total, the edge's own refusals included (docs/observability.md, "Edge").
MODEL_CALLS = frozenset(
    {"/v1/messages", "/v1/messages/count_tokens", "/openai/v1/chat/completions", RESPONSES_PREFIX}
)


def api_format(path: str) -> Format:
    """The API whose error format a request's answer takes: OpenAI under ``/openai/``, its
    Responses API under ``/openai/v1/responses`` (the same bodies; a stream's error event
    differs)."""
    if not path.startswith("/openai/"):
        return "anthropic"
    return "responses" if path.startswith(RESPONSES_PREFIX) else "openai"


def refusal_message(status: int, method: str, path: str, reason: str | None) -> str:
    """The message of a request refused before any handler ran (no route, wrong method)."""
    if status == 404:
        return f"{method} {path}: no such endpoint"
    if status == 405:
        return f"{method} {path}: method not allowed"
    return reason or "request refused"
