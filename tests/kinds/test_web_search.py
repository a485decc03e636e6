"""Anthropic's web search server tool through the real processes (docs/routing.md, "Server
tools"; docs/api.md, "Messages"): only deployments whose kind runs it get such a request, a model
served by Bedrock alone is refused with the 400 naming the tool and the model, and the searches
of a served one are billed once, on the row and in the answer's usage."""

from __future__ import annotations

import time
import uuid
from typing import Any

import anthropic
import asyncpg
import pytest
from anthropic.types import Message, ServerToolUseBlock, TextBlock, WebSearchToolResultBlock

from .conftest import Kinds

TOOL = {"type": "web_search_20250305", "name": "web_search"}


def _args(model: str, text: str = "who won the match yesterday") -> dict[str, Any]:
    return {
        "model": model,
        "max_tokens": 64,
        "messages": [{"role": "user", "content": text}],
        "tools": [TOOL],
        "extra_headers": {"x-request-id": f"search-{uuid.uuid4().hex[:16]}"},
    }


def _searched(message: Message, count: int) -> None:
    """The simulated searches arrived as the SDK's typed blocks, cited."""
    calls = [b for b in message.content if isinstance(b, ServerToolUseBlock)]
    results = [b for b in message.content if isinstance(b, WebSearchToolResultBlock)]
    assert len(calls) == len(results) == count
    assert [r.tool_use_id for r in results] == [c.id for c in calls]
    assert any(isinstance(b, TextBlock) and b.citations for b in message.content)
    assert message.usage.server_tool_use is not None
    assert message.usage.server_tool_use.web_search_requests == count


async def _bedrock_received(gw: Kinds) -> int:
    return int((await gw.stats("bedrock"))["requests"])


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_a_bedrock_only_model_refuses_the_search_with_a_400(gw: Kinds, stream: bool) -> None:
    before = await _bedrock_received(gw)
    with pytest.raises(anthropic.BadRequestError) as exc:
        if stream:
            async with gw.anthropic().messages.stream(**_args("bedrock-only")) as s:
                await s.get_final_message()
        else:
            await gw.anthropic().messages.create(**_args("bedrock-only"))
    assert exc.value.status_code == 400
    body = exc.value.body
    assert isinstance(body, dict) and body["type"] == "error", body
    assert body["error"]["type"] == "invalid_request_error"
    message = body["error"]["message"]
    assert message.startswith(
        "tools.0.type: web_search_20250305 is not available for model `bedrock-only` on any "
        "deployment of this gateway"
    ), message
    assert "remove the tool" in message
    assert await _bedrock_received(gw) == before  # Bedrock was never asked


async def test_a_count_with_the_tool_is_refused_alike(gw: Kinds) -> None:
    args = _args("bedrock-only")
    del args["max_tokens"]
    with pytest.raises(anthropic.BadRequestError) as exc:
        await gw.anthropic().messages.count_tokens(**args)
    body = exc.value.body
    assert isinstance(body, dict), body
    assert body["error"]["message"].startswith(
        "tools.0.type: web_search_20250305 is not available for model `bedrock-only`"
    )
    # On a model that has the tool the count is the deployment's own.
    args["model"] = "anthropic-only"
    raw = await gw.anthropic().messages.with_raw_response.count_tokens(**args)
    assert raw.headers["x-ezat-token-count"] == "upstream"
    assert (await raw.parse()).input_tokens > 0


async def test_without_the_tool_the_bedrock_only_model_still_answers(gw: Kinds) -> None:
    args = _args("bedrock-only")
    del args["tools"]
    message = await gw.anthropic().messages.create(**args)
    assert message.stop_reason == "end_turn" and message.usage.server_tool_use is None


async def test_a_mixed_model_sends_searches_only_where_they_run(gw: Kinds) -> None:
    """Each request names a session (fixed keys: the router hashes each over the deployments
    alike every run, docs/routing.md), so where a request would go is not left to chance: the
    plain requests of some sessions go to Bedrock, and a search in such a session does not."""
    # The package's stack is shared: tests/kinds/test_kinds.py throttles this Bedrock face, and
    # the router rests a throttled deployment. Send until a session's home is back on Bedrock
    # (its rest is seconds).
    plain: dict[str, str] = {}
    deadline = time.monotonic() + 60
    on_bedrock: list[str] = []
    while len(plain) < 30 or (not on_bedrock and time.monotonic() < deadline):
        args = _args("one-of-each", f"plain number {len(plain)}")
        del args["tools"]
        args["extra_headers"]["x-ezat-session"] = session = f"mixed-search-{len(plain)}"
        raw = await gw.anthropic().messages.with_raw_response.create(**args)
        plain[session] = raw.headers["x-ezat-deployment"]
        if plain[session] == "mix-bedrock":
            on_bedrock.append(session)
    assert on_bedrock, plain  # the pool is unchanged: plain requests still go there
    before = await _bedrock_received(gw)
    served = []
    for session in plain:
        args = _args("one-of-each", f"search in {session}")
        args["extra_headers"]["x-ezat-session"] = session
        raw = await gw.anthropic().messages.with_raw_response.create(**args)
        served.append(raw.headers["x-ezat-deployment"])
        _searched(await raw.parse(), 1)
    assert set(served) <= {"mix-anthropic", "mix-vertex"} and "mix-anthropic" in served
    assert await _bedrock_received(gw) == before


async def _rows(gw: Kinds, request_id: str) -> list[asyncpg.Record]:
    await gw.row(request_id)  # waits for the outbox
    conn = await asyncpg.connect(gw.database_url)
    try:
        return list(await conn.fetch("SELECT * FROM usage_records WHERE request_id=$1", request_id))
    finally:
        await conn.close()


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("model", ["anthropic-only", "vertex-only"])
async def test_two_real_searches_are_billed_exactly_once(
    gw: Kinds, model: str, stream: bool
) -> None:
    args = _args(model, "compare the two latest releases [sim:web_search=2]")
    request_id = args["extra_headers"]["x-request-id"]
    client = gw.anthropic()
    if stream:
        async with client.messages.stream(**args) as s:
            # The cost rides on message_delta's usage (the SDK keeps no unknown field of it).
            costs = [
                (e.usage.model_extra or {}).get("cost_usd")
                async for e in s
                if e.type == "message_delta"
            ]
            message = await s.get_final_message()
        (cost,) = costs
    else:
        message = await client.messages.create(**args)
        cost = (message.usage.model_extra or {}).get("cost_usd")
    _searched(message, 2)
    (row,) = await _rows(gw, request_id)
    assert (row["status"], row["web_search_requests"], row["web_fetch_requests"]) == (
        "complete",
        2,
        0,
    )
    assert cost == row["cost_micros"] / 1_000_000 and cost > 0


async def test_the_search_blocks_go_back_as_history_on_the_next_turn(gw: Kinds) -> None:
    """As Claude Code does: the answer's blocks, search results and citations included, are the
    next request's assistant turn; the gateway passes them on and the deployment takes them."""
    first_args = _args("one-of-each")
    first = await gw.anthropic().messages.create(**first_args)
    _searched(first, 1)
    history = [
        *first_args["messages"],
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
        {"role": "user", "content": "and the day before?"},
    ]
    raw = await gw.anthropic().messages.with_raw_response.create(
        **{**_args("one-of-each"), "messages": history}
    )
    _searched(await raw.parse(), 1)
    face = {"mix-anthropic": "anthropic", "mix-vertex": "vertex"}[raw.headers["x-ezat-deployment"]]
    (received,) = await gw.received(face)
    sent_back = received["body"]["messages"][1]["content"]
    assert [b["type"] for b in sent_back] == [b.type for b in first.content]
