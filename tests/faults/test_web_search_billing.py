"""Web searches are billed exactly once when a translator dies mid-load (issue 31;
docs/reliability.md, "A holder dies"). 120 requests at once through the real stack with two
translators: Responses (``web_search`` tool) and Chat (``web_search_options``) requests, and some
Messages requests with Anthropic's ``web_search`` server tool, streamed and not, each asking the
simulator for 1 to 3 searches; the translator holding more of them is SIGKILLed at 1 s. Once
billing settled, every answer a client got whole is charged once, for the searches the simulator
ran for it (its request log) and the answer shows; nothing is charged for an answer no client
got."""

from __future__ import annotations

import asyncio
import itertools
import json
import tomllib
from dataclasses import dataclass
from typing import Any

import anthropic
import asyncpg
import msgspec
import openai
from ezat_billing.core.rows import UsageRow
from ezat_common.prices import Prices
from ezat_common.pricing import cost_micros
from support.sims import requests as sim_requests

from .load import Call, Gateway, History, Kind, chat, check, one, ranges, serves_again, summary
from .test_holder_death import LOAD_METRIC, SETTLED, kill_busier

N = 120
# 6 s at the simulator's 100 ms a token (and 0.1 s a search): longer than the holder test's 4 s,
# because on a loaded machine the translator's /metrics, which picks the victim, answered only
# seconds late, and a 4 s load had ended before the kill.
TOKENS = 60
FAULT_AT = 1.0
# The kill (late by up to 3 s, see above), the 3 s owner timeout, the whole request again (6.3 s),
# with room for load: a request still open past it is a failure, not a slow answer.
BOUND = FAULT_AT + 3.0 + 3.0 + 6.3 + 6.0
# $10 per 1,000 searches, the catalogue's default (docs/billing.md, "Server tools"), in µ$.
PER_SEARCH_MICROS = 10_000
# (API, streamed): Responses and Chat go through a translator, Messages do not.
MIX = [(api, stream) for api in ("responses", "chat") * 2 for stream in (True, False)]
MIX += [("messages", True), ("messages", False)]
# The history's kind: which API's edge path (the Messages API's bypasses the translators).
KINDS: dict[tuple[bool, bool], Kind] = {
    (True, True): "anthropic-stream",
    (True, False): "anthropic-json",
    (False, True): "openai-stream",
    (False, False): "openai-json",
}
ANTHROPIC_TOOL = {"type": "web_search_20250305", "name": "web_search", "max_uses": 5}


@dataclass
class Searched:
    """A request's API and the searches asked of the simulator; ``seen``: the searches its
    answer showed (None while it showed none: Chat's answer does not count them)."""

    api: str
    asked: int
    seen: int | None = None


def _prompt(searches: int) -> str:
    return f"Search the web, then tell me a long story. [sim:tokens={TOKENS} web_search={searches}]"


def _args(h: History, **fields: Any) -> dict[str, Any]:
    """An SDK call's arguments: the model, ``fields``, and the request id the rows are found by."""
    return {"model": "claude-sonnet-5-5", **fields, "extra_headers": {"x-request-id": h.request_id}}


def _caller(s: Searched, oa: openai.AsyncOpenAI, an: anthropic.AsyncAnthropic) -> Call:
    """The client side of one request of ``s``'s API, with a web search."""
    text = _prompt(s.asked)

    async def responses(_: Gateway, h: History, stream: bool, _t: int, _ms: int | None) -> None:
        args = _args(h, input=text, tools=[{"type": "web_search"}])
        if not stream:
            final = await oa.responses.create(**args)
        else:
            async with oa.responses.stream(**args) as events:
                async for event in events:
                    h.started_streaming |= event.type == "response.output_text.delta"
                final = await events.get_final_response()
        s.seen = sum(item.type == "web_search_call" for item in final.output)
        h.chars = len(final.output_text)
        h.outcome = "complete"

    async def chat_(_: Gateway, h: History, stream: bool, _t: int, _ms: int | None) -> None:
        messages = [{"role": "user", "content": text}]
        await chat(oa, h, stream, _args(h, messages=messages, web_search_options={}))

    async def messages(_: Gateway, h: History, stream: bool, _t: int, _ms: int | None) -> None:
        messages = [{"role": "user", "content": text}]
        args = _args(h, max_tokens=1024, messages=messages, tools=[ANTHROPIC_TOOL])
        if not stream:
            message = await an.messages.create(**args)
        else:
            async with an.messages.stream(**args) as events:
                async for event in events:
                    h.started_streaming |= event.type == "text"
                message = await events.get_final_message()
        usage = message.usage.server_tool_use
        s.seen = usage.web_search_requests if usage is not None else 0
        h.outcome = "complete"

    return {"responses": responses, "chat": chat_, "messages": messages}[s.api]


async def _rows(t: Gateway, ids: list[str]) -> list[UsageRow]:
    """The usage rows of requests ``ids``, as billing wrote them."""
    conn = await asyncpg.connect(t.database_url)
    try:
        rows = await conn.fetch(
            f"SELECT {', '.join(UsageRow.__struct_fields__)} FROM usage_records"
            " WHERE request_id = ANY($1::text[])",
            ids,
        )
    finally:
        await conn.close()
    return [msgspec.convert({**r, "prices": json.loads(r["prices"])}, UsageRow) for r in rows]


async def _sim_ran(t: Gateway) -> dict[str, list[dict[str, Any]]]:
    """The simulator's log of the requests it answered, by the client's request id."""
    config = tomllib.loads(t.stack.config_path.read_text())
    sim = f"http://{config['simulators'][0]['listen']}"
    by_id: dict[str, list[dict[str, Any]]] = {}
    for record in await sim_requests(sim, 256):  # the log's size; the load is well below it
        by_id.setdefault(record["headers"].get("x-request-id", ""), []).append(record)
    return by_id


def _searches(record: dict[str, Any]) -> int:
    return int((record["server_tool_use"] or {}).get("web_search_requests", 0))


async def _load(t: Gateway, killed: list[float]) -> tuple[list[History], dict[str, Searched]]:
    async with (
        openai.AsyncOpenAI(base_url=t.url + "/openai/v1", api_key=t.key, max_retries=0) as oa,
        anthropic.AsyncAnthropic(base_url=t.url, api_key=t.key, max_retries=0) as an,
    ):
        mix, searches = itertools.cycle(MIX), itertools.cycle((1, 2, 3))
        asked = [(*next(mix), next(searches)) for _ in range(N)]
        tasks, made = [], []
        for api, stream, n in asked:
            s = Searched(api, n)
            made.append(s)
            kind = KINDS[(api == "messages", stream)]
            tasks.append(asyncio.create_task(one(t, kind, TOKENS, call=_caller(s, oa, an))))
        await asyncio.sleep(FAULT_AT)
        await kill_busier(t, "translator", killed)()
        histories = list(await asyncio.gather(*tasks))
    return histories, {h.request_id: s for h, s in zip(histories, made, strict=True)}


async def test_translator_sigkill_bills_each_delivered_search_once(fault_stack: Gateway) -> None:
    t = fault_stack
    for name in ("translator", "translator-2"):
        t.baseline[name] = await t.sample(name, LOAD_METRIC["translator"])
    killed: list[float] = []
    histories, asked = await _load(t, killed)
    await asyncio.sleep(SETTLED)  # records never confirmed delivered are settled failed by then
    rows = await _rows(t, list(asked))
    by_id: dict[str, list[UsageRow]] = {}
    for r in rows:
        by_id.setdefault(r.request_id, []).append(r)
    for h in histories:
        h.rows = [msgspec.to_builtins(r) for r in by_id.get(h.request_id, [])]
    ran = await _sim_ran(t)
    print("web search", summary(histories), ranges(histories), ranges(histories, killed[0]))
    check(histories, BOUND)
    # The translator held streams of both OpenAI APIs: the kill was not vacuous.
    ended = [asked[h.request_id].api for h in histories if h.outcome == "stream_error"]
    assert ended, "no stream was on the killed translator"
    # Every complete answer: one row charged, for the searches the simulator ran for it. A
    # request published twice may have run them twice upstream; only the answer delivered pays.
    wrong: list[tuple[Any, ...]] = []
    unbilled_runs = 0
    for h in histories:
        s, runs = (
            asked[h.request_id],
            [r for r in ran.get(h.request_id, []) if r["outcome"] == "complete"],
        )
        paid = [r for r in by_id.get(h.request_id, []) if r.cost_micros > 0]
        if h.outcome != "complete":
            unbilled_runs += sum(map(_searches, runs))
            if paid:
                wrong.append(
                    (s.api, h.outcome, "charged", [(r.status, r.cost_micros) for r in paid])
                )
            continue
        unbilled_runs += sum(map(_searches, runs)) - s.asked
        shown = {_searches(r) for r in runs}
        billed = [r.web_search_requests for r in paid]
        if shown != {s.asked} or billed != [s.asked] or s.seen not in (None, s.asked):
            wrong.append((s.api, h.request_id, s.asked, shown, billed, s.seen))
    assert not wrong, f"(api, request, searches asked, run upstream, billed, answer): {wrong}"
    # The search fees: searches x price, on top of the tokens, at the rows' own prices.
    fees = 0
    for r in (r for r in rows if r.status != "failed"):
        prices = msgspec.convert(r.prices, Prices)
        assert prices.web_search_per_1k == PER_SEARCH_MICROS * 1000, prices
        assert r.cost_micros == cost_micros(r, prices), r
        fees += r.cost_micros - cost_micros(
            msgspec.structs.replace(r, web_search_requests=0), prices
        )
    delivered = sum(asked[h.request_id].asked for h in histories if h.outcome == "complete")
    assert fees == delivered * PER_SEARCH_MICROS, (fees, delivered)
    print(f"searches billed {delivered}, completed upstream for no client {unbilled_runs},"
          f" streams ended by the kill {len(ended)}")  # fmt: skip
    await serves_again(t)
