"""core/routes.py: which API's format a path answers in, and refusals before any handler."""

from __future__ import annotations

import pytest
from ezat_edge.core.routes import api_format, refusal_message


@pytest.mark.parametrize(
    ("path", "fmt"),
    [
        ("/openai/v1/chat/completions", "openai"),
        ("/openai/v1/models", "openai"),
        ("/v1/messages", "anthropic"),
        ("/openai", "anthropic"),  # not under /openai/
        ("/api/usage", "anthropic"),
    ],
)
def test_api_format_of_path(path: str, fmt: str) -> None:
    assert api_format(path) == fmt


def test_refusal_messages_name_method_and_path() -> None:
    assert refusal_message(404, "GET", "/v2/x", "Not Found") == "GET /v2/x: no such endpoint"
    assert refusal_message(405, "PUT", "/v1/messages", "Method Not Allowed") == (
        "PUT /v1/messages: method not allowed"
    )
    assert refusal_message(413, "POST", "/v1/messages", "Too Large") == "Too Large"
    assert refusal_message(400, "POST", "/v1/messages", "") == "request refused"
