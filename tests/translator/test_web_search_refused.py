"""The router's 400 for a web search no deployment of the model runs, as each OpenAI API's
conversion rewrites it (conversions.py): named by what the client sent, status and code kept;
every other error passes unchanged."""

from __future__ import annotations

from typing import Any

import pytest
from ezat_common.envelopes import ReplyError
from ezat_translator.conversions import ChatConversion, ResponsesConversion
from ezat_translator.core.anthropic_to_responses import ResponseMeta
from ezat_translator.core.web_search import responses_search_param

ROUTER = ReplyError(
    status=400,
    type="invalid_request_error",
    message="tools.3.type: web_search_20250305 is not available for model `m` on any "
    "deployment of this gateway (...); remove the tool, or use a model served by an anthropic "
    "or vertex deployment.",
    param="tools.3.type",
    code="server_tool_unavailable",
    headers={"x-ezat-region": "r1"},
)
TAIL = (
    "web search is not available for model `m` on any of its deployments (none of them has a "
    "web search server tool); remove {}, or use a model served by an anthropic or vertex "
    "deployment."
)


def _chat() -> ChatConversion:
    return ChatConversion("req", "m", 0, None, thinking=None, key_id="k")  # type: ignore[arg-type]


def _responses(param: str | None) -> ResponsesConversion:
    meta = ResponseMeta(request_id="req", uid="u", response_model="m", created_at=0)
    return ResponsesConversion(meta, None, None, None, param)


def test_chat_names_web_search_options() -> None:
    out = _chat().error(ROUTER)
    assert out.param == "web_search_options"
    assert out.message == "web_search_options: " + TAIL.format("web_search_options")
    assert (out.status, out.type, out.code, out.headers) == (
        400,
        "invalid_request_error",
        "server_tool_unavailable",
        {"x-ezat-region": "r1"},
    )


def test_responses_names_the_clients_tool() -> None:
    out = _responses("tools[2].type").error(ROUTER)
    assert out.param == "tools[2].type"
    assert out.message == "tools[2].type: " + TAIL.format("the tool")
    assert (out.status, out.code) == (400, "server_tool_unavailable")


@pytest.mark.parametrize(
    "reply",
    [
        ReplyError(status=400, type="invalid_request_error", message="x", param="tools.0.type"),
        ReplyError(status=529, type="overloaded_error", message="busy"),
    ],
)
def test_other_errors_pass_unchanged(reply: ReplyError) -> None:
    assert _chat().error(reply) is reply
    assert _responses("tools[0].type").error(reply) is reply


def test_responses_without_a_search_tool_keeps_the_routers_words() -> None:
    assert _responses(None).error(ROUTER) is ROUTER


@pytest.mark.parametrize(
    ("tools", "param"),
    [
        (None, None),
        ([{"type": "function", "name": "f"}], None),
        ([{"type": "function", "name": "f"}, {"type": "namespace"}, {"type": "web_search"}], 2),
        ([{"type": "web_search_preview_2025_03_11"}], 0),
    ],
)
def test_the_clients_search_tool_index(
    tools: list[dict[str, Any]] | None, param: int | None
) -> None:
    want = None if param is None else f"tools[{param}].type"
    assert responses_search_param(tools) == want
