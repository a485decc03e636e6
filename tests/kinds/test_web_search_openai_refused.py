"""Web search from the OpenAI APIs on a model served by Bedrock alone, through the real
processes (docs/api.md and docs/responses.md, "Web search"): the router's 400 names the
translated Messages body's ``tools.N.type``, which the client never sent; the client is told
the field it did send (``web_search_options``, or its own ``tools[i].type``), status and code
kept."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from .conftest import Kinds

TAIL = (
    "web search is not available for model `bedrock-only` on any of its deployments (none of "
    "them has a web search server tool); remove {remove}, or use a model served by an "
    "anthropic or vertex deployment."
)


def _refusal(exc: openai.BadRequestError, param: str, remove: str) -> None:
    assert exc.status_code == 400
    assert exc.param == param and exc.code == "server_tool_unavailable", exc.body
    assert exc.message.endswith(f"{param}: " + TAIL.format(remove=remove)), exc.message


async def _bedrock_received(gw: Kinds) -> int:
    return int((await gw.stats("bedrock"))["requests"])


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_chat_is_told_web_search_options(gw: Kinds, stream: bool) -> None:
    before = await _bedrock_received(gw)
    args: dict[str, Any] = {
        "model": "bedrock-only",
        "messages": [{"role": "user", "content": "who won the match yesterday"}],
        # Two function tools first: the router's index (tools.2) is none of the client's.
        "tools": [
            {"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
            for n in ("lookup", "note")
        ],
        "web_search_options": {},
    }
    with pytest.raises(openai.BadRequestError) as exc:
        if stream:
            async for _ in await gw.openai().chat.completions.create(**args, stream=True):
                pass
        else:
            await gw.openai().chat.completions.create(**args)
    _refusal(exc.value, "web_search_options", "web_search_options")
    assert await _bedrock_received(gw) == before


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_responses_is_told_its_own_tool_index(gw: Kinds, stream: bool) -> None:
    before = await _bedrock_received(gw)
    # The namespace expands to two upstream tools: web search is the client's tools[2] but
    # the translated body's tools.3.
    tools: list[Any] = [
        {"type": "function", "name": "lookup", "parameters": {"type": "object"}},
        {
            "type": "namespace",
            "name": "agents",
            "description": "sub-agents",
            "tools": [
                {"type": "function", "name": n, "parameters": {"type": "object"}}
                for n in ("spawn", "wait")
            ],
        },
        {"type": "web_search"},
    ]
    with pytest.raises(openai.BadRequestError) as exc:
        args: dict[str, Any] = {"model": "bedrock-only", "input": "search it", "tools": tools}
        if stream:
            async for _ in await gw.openai().responses.create(**args, stream=True):
                pass
        else:
            await gw.openai().responses.create(**args)
    _refusal(exc.value, "tools[2].type", "the tool")
    assert await _bedrock_received(gw) == before


async def test_without_web_search_the_model_still_answers(gw: Kinds) -> None:
    """The refusal is the tool's alone: without it the same model answers."""
    reply = await gw.openai().chat.completions.create(
        model="bedrock-only", messages=[{"role": "user", "content": "hello"}]
    )
    assert reply.choices[0].message.content
