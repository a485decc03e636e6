"""Web search through the real processes with the official openai SDK (issue 31; docs/responses.md
and docs/api.md, "Web search"): the Responses ``web_search`` tool and Chat's
``web_search_options`` become the deployment's web search server tool (the simulator's,
simulator/README.md "Web search"), its searches and citations come back as the SDK's typed items
and annotations, JSON and streamed alike, a search is billed once at the model's price, the
search items round-trip with their encrypted content in a stateless loop, and a model served by
Bedrock alone (no web search there) is a 400.

A stack of its own: one simulator serving the Anthropic face (model ``search-sonnet``, with a
web search price of its own) and the Bedrock face (model ``bedrock-only``)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import openai
import pytest
from ezat_cli.infra import Infra
from ezat_simulator.websearch import results_for
from openai.types.responses import Response
from support.config import base_url, deployment, listen, model, write_config
from support.stack import free_ports, key, running

from .conftest import Gateway

MODEL = "search-sonnet"
BEDROCK_ONLY = "bedrock-only"
# Micro-dollars: per token (price per million tokens / 10^6) and per search ($12.50 per 1,000:
# not Anthropic's $10 default, so the fee is the model's own).
INPUT, OUTPUT, SEARCH = 3, 15, 12_500
SEARCH_TOOL = {"type": "web_search"}
ASK = "what changed in the latest python release"


@pytest.fixture(scope="module")
def gateway(infra: Infra, database_url: str, data_dir: Path) -> Iterator[Gateway]:
    ports = free_ports("edge", "sim", "router_metrics")
    sim = base_url(ports["sim"])
    bedrock = {"kind": "bedrock", "base_url": sim, "region": "us-east-1"}
    bedrock |= {"routing_region": "local", "model_id": "anthropic.claude-sonnet-5-5-v1:0"}
    config = write_config(
        data_dir / "web-search" / "ezat.toml",
        edge={"listen": listen(ports["edge"])},
        router={"region": "local", "metrics_listen": listen(ports["router_metrics"])},
        models=[
            model(
                f"anthropic/{MODEL}",
                aliases=[MODEL],
                price={"input": 3.0, "output": 15.0, "web_search_per_1k": 12.5},
            ),
            model(f"anthropic/{BEDROCK_ONLY}", aliases=[BEDROCK_ONLY]),
        ],
        simulators=[{"name": "search-sim", "listen": listen(ports["sim"])}],
        deployments=[
            deployment("search-a", f"anthropic/{MODEL}", sim, upstream_model="claude-sonnet-5-5"),
            {"name": "only-bedrock", "model": f"anthropic/{BEDROCK_ONLY}", **bedrock}
            | {"api_key_env": "WEB_SEARCH_BEDROCK_KEY"},
        ],
    )
    env = {"WEB_SEARCH_BEDROCK_KEY": "bedrock-key", "EZAT_SIM_BEDROCK_API_KEY": "bedrock-key"}
    stack_infra = Infra(infra.nats_url, database_url, infra.redis_url)
    with running(config, stack_infra, "websearch", env=env) as stack:
        both = {"sim_a": ports["sim"], "sim_b": ports["sim"]}
        yield Gateway(stack, {**ports, **both}, key(database_url, "websearch"), database_url)


async def _asked(gateway: Gateway) -> int:
    """How many requests the simulator (both faces) has received so far."""
    async with aiohttp.ClientSession() as s, s.get(f"{gateway.sim_a}/_sim/stats") as r:
        return int((await r.json())["requests"])


async def _respond(
    client: openai.AsyncOpenAI, items: Any, tool: Any = SEARCH_TOOL, model: str = MODEL, **kw: Any
) -> Response:
    """A stateless Responses answer with ``tool`` on offer."""
    return await client.responses.create(model=model, input=items, tools=[tool], store=False, **kw)


def _rid() -> str:
    return f"search-{uuid.uuid4().hex}"


def _client(gateway: Gateway) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url=gateway.url + "/openai/v1", api_key=gateway.key, max_retries=0
    )


def _annotations(resp: Response) -> list[dict[str, Any]]:
    """Every url_citation of the answer's text, checked to lie inside its part's text."""
    found = []
    for item in resp.output:
        if item.type != "message":
            continue
        for part in item.content:
            assert part.type == "output_text"
            for note in part.annotations:
                assert note.type == "url_citation"
                assert note.url and note.title
                assert 0 <= note.start_index < note.end_index <= len(part.text)
                found.append(note.model_dump())
    return found


def _searched(resp: Response) -> list[Any]:
    """The answer's searches: completed, each with its query and the pages it found."""
    calls = [item for item in resp.output if item.type == "web_search_call"]
    for call in calls:
        assert call.status == "completed"
        assert call.action.type == "search" and call.action.query
    assert resp.status == "completed" and resp.output[-1].type == "message"
    return calls


async def test_responses_json_searches_cites_and_bills_the_search_once(gateway: Gateway) -> None:
    rid = _rid()
    async with _client(gateway) as client:
        resp = await _respond(client, ASK, extra_headers={"x-request-id": rid})
    (call,) = _searched(resp)
    notes = _annotations(resp)
    assert notes, resp.output
    # The citation is of a page the search found.
    assert {n["url"] for n in notes} <= {s.url for s in call.action.sources or ()}
    row = await gateway.usage_row(rid)
    assert row is not None and row["web_search_requests"] == 1
    assert resp.usage is not None
    assert (row["input_tokens"], row["output_tokens"]) == (
        resp.usage.input_tokens,
        resp.usage.output_tokens,
    )
    assert row["cache_read_tokens"] == row["cache_write_5m_tokens"] == 0
    fee = row["input_tokens"] * INPUT + row["output_tokens"] * OUTPUT + SEARCH
    assert row["cost_micros"] == fee
    assert getattr(resp.usage, "cost_usd", None) == row["cost_micros"] / 1_000_000


async def test_responses_stream_gives_the_search_events_and_the_json_answer(
    gateway: Gateway,
) -> None:
    kinds: list[str] = []
    async with _client(gateway) as client:
        whole = await _respond(client, ASK)
        async with client.responses.stream(
            model=MODEL,
            input=ASK,
            tools=[SEARCH_TOOL],
            store=False,
        ) as stream:
            async for event in stream:
                kinds.append(event.type)
            final = await stream.get_final_response()
    search = [
        "response.web_search_call.in_progress",
        "response.web_search_call.searching",
        "response.web_search_call.completed",
    ]
    assert [k for k in kinds if k.startswith("response.web_search_call.")] == search
    notes = _annotations(whole)
    assert notes and kinds.count("response.output_text.annotation.added") == len(notes)
    assert len(_searched(final)) == len(_searched(whole)) == 1
    assert [o.type for o in final.output] == [o.type for o in whole.output]
    assert _annotations(final) == notes
    assert final.output_text == whole.output_text


async def test_a_stateless_loop_sends_the_search_back_with_its_pages(gateway: Gateway) -> None:
    first: list[Any] = [{"role": "user", "content": ASK}]
    async with _client(gateway) as client:
        turn1 = await _respond(client, first)
        (call,) = _searched(turn1)
        items = first + [o.model_dump(exclude_none=True) for o in turn1.output]
        items.append({"role": "user", "content": "Summarise that in one line."})
        turn2 = await _respond(client, items)
        assert turn2.status == "completed" and turn2.output_text
        # An altered search id: refused, naming the item, before any deployment is asked.
        at = next(n for n, item in enumerate(items) if item.get("type") == "web_search_call")
        altered = [dict(item) for item in items]
        sealed = altered[at]["id"]
        middle = len(sealed) // 2
        altered[at]["id"] = (
            sealed[:middle] + ("A" if sealed[middle] != "A" else "B") + sealed[middle + 1 :]
        )
        before = await _asked(gateway)
        with pytest.raises(openai.BadRequestError) as exc:
            await _respond(client, altered)
    assert exc.value.status_code == 400
    assert f"input[{at}].id" in str(exc.value.message), exc.value.message
    assert await _asked(gateway) == before
    sent = (await gateway.sent_for(turn2))["body"]
    blocks = [
        block
        for message in sent["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
    ]
    (use,) = [b for b in blocks if b["type"] == "server_tool_use"]
    (result,) = [b for b in blocks if b["type"] == "web_search_tool_result"]
    assert use["name"] == "web_search" and use["input"] == {"query": call.action.query}
    assert result["tool_use_id"] == use["id"]
    # The pages exactly as the deployment found them in turn 1 (derived from the query alone),
    # encrypted content included: what Anthropic needs to cite them again.
    tool = {"type": "web_search_20250305", "name": "web_search"}
    pages = results_for(call.action.query, tool)
    assert [r["encrypted_content"] for r in result["content"]] == [
        p["encrypted_content"] for p in pages
    ]
    assert all(r["encrypted_content"] for r in result["content"])


async def test_chat_json_and_stream_carry_the_same_url_citations(gateway: Gateway) -> None:
    messages: list[Any] = [{"role": "user", "content": ASK}]
    async with _client(gateway) as client:
        completion = await client.chat.completions.create(
            model=MODEL, messages=messages, web_search_options={}
        )
        async with client.chat.completions.stream(
            model=MODEL, messages=messages, web_search_options={}
        ) as stream:
            streamed = (await stream.get_final_completion()).choices[0].message
    message = completion.choices[0].message
    assert message.content and message.annotations
    for note in message.annotations:
        assert note.type == "url_citation"
        cited = note.url_citation
        assert cited.url and cited.title
        assert 0 <= cited.start_index < cited.end_index <= len(message.content)
    assert streamed.content == message.content
    assert streamed.annotations == message.annotations


async def test_a_bedrock_only_model_refuses_web_search_in_both_apis(gateway: Gateway) -> None:
    before = await _asked(gateway)
    async with _client(gateway) as client:
        with pytest.raises(openai.BadRequestError) as responses:
            await _respond(client, ASK, model=BEDROCK_ONLY)
        with pytest.raises(openai.BadRequestError) as chat:
            await client.chat.completions.create(
                model=BEDROCK_ONLY,
                messages=[{"role": "user", "content": ASK}],
                web_search_options={},
            )
    for exc in (responses.value, chat.value):
        assert exc.status_code == 400
        said = exc.message.lower()
        assert BEDROCK_ONLY in said and ("web search" in said or "web_search" in said), said
    assert await _asked(gateway) == before  # neither face was asked


@pytest.mark.parametrize(("size", "uses"), [("low", 1), ("high", 5)])
async def test_search_context_size_is_the_number_of_searches(
    gateway: Gateway, size: str, uses: int
) -> None:
    async with _client(gateway) as client:
        resp = await _respond(client, ASK, {"type": "web_search", "search_context_size": size})
        completion = await client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": ASK}],
            web_search_options={"search_context_size": size},
        )
    for sent in (await gateway.sent_for(resp), await gateway.sent_for(completion)):
        (tool,) = sent["body"]["tools"]
        assert (tool["type"], tool["max_uses"]) == ("web_search_20250305", uses), tool


async def test_allowed_domains_keep_the_results_to_them(gateway: Gateway) -> None:
    allowed = ["docs.python.org", "peps.python.org"]
    tool = {"type": "web_search", "filters": {"allowed_domains": allowed}}
    async with _client(gateway) as client:
        resp = await _respond(client, ASK, tool)
    (call,) = _searched(resp)
    urls = [s.url for s in call.action.sources or ()] + [n["url"] for n in _annotations(resp)]
    assert urls and {urlsplit(u).hostname for u in urls} <= set(allowed), urls
    (sent,) = (await gateway.sent_for(resp))["body"]["tools"]
    assert sent["allowed_domains"] == allowed
