"""Which deployments may run a request's server tools (ezat_router/core/server_tools.py;
docs/routing.md, "Server tools"): what is found in a body, the pick by kind, and the 400."""

from __future__ import annotations

import json
from typing import Any

import pytest
from ezat_common.config import DeploymentConfig
from ezat_common.errors import ANTHROPIC, OPENAI, RESPONSES
from ezat_router.core import server_tools
from ezat_router.core.server_tools import ServerTool


def dep(name: str, kind: str) -> DeploymentConfig:
    if kind == "anthropic":
        return DeploymentConfig(name=name, model="m", base_url="https://a.example")
    extra: dict[str, Any] = {"project": "p"} if kind == "vertex" else {}
    return DeploymentConfig(
        name=name, model="m", kind=kind, region="us-east-1", model_id="x", **extra
    )


ANT, BED, VTX, BED2 = (
    dep("ant", "anthropic"),
    dep("bed", "bedrock"),
    dep("vtx", "vertex"),
    dep("bed2", "bedrock"),
)
SEARCH = {"type": "web_search_20250305", "name": "web_search", "max_uses": 2}
FETCH = {"type": "web_fetch_20250910", "name": "web_fetch"}
CUSTOM = {"name": "get_weather", "input_schema": {"type": "object"}}


def body(*tools: Any, text: str = "hi") -> bytes:
    fields: dict[str, Any] = {"max_tokens": 5, "messages": [{"role": "user", "content": text}]}
    if tools:
        fields["tools"] = list(tools)
    return json.dumps(fields).encode()


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (body(), ()),
        (body(CUSTOM), ()),
        (body(CUSTOM, SEARCH), (ServerTool(1, "web_search_20250305"),)),
        (body({**SEARCH, "type": "web_search_20260318"}), (ServerTool(0, "web_search_20260318"),)),
        (
            body(FETCH, CUSTOM, SEARCH),
            (ServerTool(0, "web_fetch_20250910"), ServerTool(2, "web_search_20250305")),
        ),
        # the words in a prompt are not a tool
        (body(CUSTOM, text='say "web_search_20250305" twice'), ()),
        (b'{"tools": [{"type": "web_search_2025', ()),  # not JSON: the deployment's 400
    ],
)
def test_what_a_body_asks_for(raw: bytes, expected: tuple[ServerTool, ...]) -> None:
    assert server_tools.requested(raw) == expected


TOOL = (ServerTool(0, "web_search_20250305"),)


@pytest.mark.parametrize(
    ("pool", "tools", "expected"),
    [
        ((ANT, BED, VTX), (), (ANT, BED, VTX)),  # no server tool: every deployment
        ((ANT, BED, VTX), TOOL, (ANT, VTX)),  # Bedrock has no web search
        ((BED, ANT), TOOL, (ANT,)),
        ((BED, VTX), (ServerTool(3, "web_fetch_20250910"),), (VTX,)),
        ((BED, BED2), TOOL, ()),  # a Bedrock-only model: none
        ((BED,), (), (BED,)),
    ],
)
def test_the_pick(
    pool: tuple[DeploymentConfig, ...],
    tools: tuple[ServerTool, ...],
    expected: tuple[DeploymentConfig, ...],
) -> None:
    assert server_tools.able(pool, tools) == expected


def test_the_refusal_names_the_tool_the_model_and_what_to_do() -> None:
    err = server_tools.unavailable(ServerTool(2, "web_search_20250305"), "sonnet", (BED, BED2))
    assert (err.status, err.type, err.param) == (400, "invalid_request_error", "tools.2.type")
    assert err.message == (
        "tools.2.type: web_search_20250305 is not available for model `sonnet` on any "
        "deployment of this gateway (it is served by bedrock deployments only, which have no "
        "web_search server tool); remove the tool, or use a model served by an anthropic or "
        "vertex deployment."
    )
    rendered = json.loads(ANTHROPIC.body(err.reply, "req_1"))
    assert rendered["type"] == "error"
    assert rendered["error"] == {"type": "invalid_request_error", "message": err.message}


@pytest.mark.parametrize("renderer", [OPENAI, RESPONSES], ids=["chat", "responses"])
def test_the_refusal_as_openai_clients_see_it(renderer: Any) -> None:
    """Relayed to an OpenAI API as any router error: its 400, param and code kept."""
    err = server_tools.unavailable(ServerTool(0, "web_search_20250305"), "sonnet", (BED,))
    assert renderer.status(err.reply) == 400
    assert json.loads(renderer.body(err.reply, "req_1")) == {
        "error": {
            "message": err.message,
            "type": "invalid_request_error",
            "param": "tools.0.type",
            "code": "server_tool_unavailable",
        }
    }
