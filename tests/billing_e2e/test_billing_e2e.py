"""Billing through the whole stack: rows and costs, the views of both APIs, early close, failure,
budgets, the usage API, and billing killed in the middle of 200 streams."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import time
import uuid

import aiohttp
import openai
import pytest

from .conftest import MODEL, PRICES, BillingStack, eventually

pytestmark = pytest.mark.timeout(150)


def cost_by_hand(row: object) -> int:
    r = row  # asyncpg.Record: micro-dollars per token are the USD-per-million prices
    exact = (
        r["input_tokens"] * PRICES["input"]  # type: ignore[index]
        + r["cache_read_tokens"] * PRICES["read"]  # type: ignore[index]
        + r["cache_write_5m_tokens"] * PRICES["cw5"]  # type: ignore[index]
        + r["cache_write_1h_tokens"] * PRICES["cw1"]  # type: ignore[index]
        + r["output_tokens"] * PRICES["output"]  # type: ignore[index]
    )
    return int(exact + 0.5 + 1e-9)


async def test_cached_request_costs_every_token_kind_at_its_price(
    billing_stack: BillingStack,
) -> None:
    """Cache write (1 h), then cache read, with thinking: the rows match a hand computation."""
    system = [
        {
            "type": "text",
            "text": "policy " * 1200,  # ~2100 tokens: above min_cache_tokens
            "cache_control": {"type": "ephemeral", "ttl": "1h"},
        }
    ]
    client = billing_stack.anthropic()
    rows = []
    marker = uuid.uuid4().hex
    for _ in range(2):
        raw = await client.messages.with_raw_response.create(
            model=MODEL,
            max_tokens=2000,
            system=system,  # type: ignore[arg-type]
            thinking={"type": "enabled", "budget_tokens": 1024},
            messages=[{"role": "user", "content": f"{marker} [sim:tokens=30 think=8]"}],
        )
        msg = await raw.parse()
        row = await billing_stack.row(raw.headers["request-id"])
        rows.append(row)
        # The Anthropic view the client saw is the record.
        assert msg.usage.input_tokens == row["input_tokens"]
        assert msg.usage.output_tokens == row["output_tokens"]
        assert (msg.usage.cache_read_input_tokens or 0) == row["cache_read_tokens"]
        written = row["cache_write_5m_tokens"] + row["cache_write_1h_tokens"]
        assert (msg.usage.cache_creation_input_tokens or 0) == written
    first, second = rows
    assert first["cache_write_1h_tokens"] > 1000 and first["cache_read_tokens"] == 0
    assert second["cache_read_tokens"] == first["cache_write_1h_tokens"]
    assert second["cache_write_1h_tokens"] == 0
    assert first["reasoning_tokens"] == 8 and first["output_tokens"] >= 38
    for row in rows:
        assert row["status"] == "complete" and not row["estimated"]
        assert row["cost_micros"] == cost_by_hand(row)
        assert json.loads(row["prices"]) == {
            "input": 3_000_000,
            "output": 15_000_000,
            "cache_write_5m": 3_750_000,
            "cache_write_1h": 6_000_000,
            "cache_read": 300_000,
            # Server tools: Anthropic's published prices, per 1,000 requests (docs/billing.md).
            "web_search_per_1k": 10_000_000,
            "web_fetch_per_1k": 0,
        }
        assert row["deployment"] == "sonnet-sim" and row["region"] == "local"
        assert row["ttft_ms"] is not None and row["total_ms"] >= row["ttft_ms"]
    # Hand-computed for the exact counts: 1 h write at $6/M, read at $0.30/M.
    assert first["cost_micros"] > second["cost_micros"]


async def test_openai_view_agrees_with_the_record(billing_stack: BillingStack) -> None:
    async with openai.AsyncOpenAI(
        base_url=billing_stack.url + "/openai/v1", api_key=billing_stack.key, max_retries=0
    ) as client:
        raw = await client.chat.completions.with_raw_response.create(
            model=MODEL,
            max_tokens=100,
            messages=[{"role": "user", "content": "count [sim:tokens=17]"}],
        )
    chat = raw.parse()
    row = await billing_stack.row(raw.headers["request-id"])
    assert chat.usage is not None
    prompt = (
        row["input_tokens"]
        + row["cache_read_tokens"]
        + row["cache_write_5m_tokens"]
        + row["cache_write_1h_tokens"]
    )
    assert chat.usage.prompt_tokens == prompt
    assert chat.usage.completion_tokens == row["output_tokens"] == 17
    assert row["api"] == "chat" and row["cost_micros"] == cost_by_hand(row)


async def test_count_tokens_is_never_recorded(billing_stack: BillingStack) -> None:
    client = billing_stack.anthropic()
    raw = await client.messages.with_raw_response.count_tokens(
        model=MODEL, messages=[{"role": "user", "content": "how many"}]
    )
    await asyncio.sleep(1.0)
    rid = raw.headers["request-id"]
    rows = await billing_stack.fetch("SELECT 1 FROM usage_records WHERE request_id=$1", rid)
    assert rows == []


async def test_client_closing_after_n_tokens_pays_for_about_n(billing_stack: BillingStack) -> None:
    n = 10
    body = {
        "model": MODEL,
        "max_tokens": 500,
        "stream": True,
        "messages": [{"role": "user", "content": "slow [sim:tokens=200 token_ms=40]"}],
    }
    headers = {"x-api-key": billing_stack.key, "anthropic-version": "2023-06-01"}
    deltas = 0
    async with (
        aiohttp.ClientSession() as s,
        s.post(f"{billing_stack.url}/v1/messages", json=body, headers=headers) as resp,
    ):
        rid = resp.headers["request-id"]
        async for line in resp.content:
            if line.startswith(b"data: ") and b'"text_delta"' in line:
                deltas += line.count(b'"text_delta"')
                if deltas >= n:
                    break
        resp.close()  # the client goes away mid-stream
    row = await billing_stack.row(rid)
    assert row["status"] == "client_closed" and row["estimated"] is True
    # Output estimated from the text produced (4 characters a token): what the client read plus
    # what was in flight when the cancellation arrived, nowhere near the 200 it asked for.
    assert n <= row["output_tokens"] <= n + 15
    assert row["input_tokens"] > 0 and row["cost_micros"] == cost_by_hand(row)


async def test_upstream_failure_costs_nothing(billing_stack: BillingStack) -> None:
    client = billing_stack.anthropic()
    events = []
    rid = ""
    async with client.messages.stream(
        model=MODEL,
        max_tokens=100,
        messages=[{"role": "user", "content": "break [sim:tokens=30 fail_after=5]"}],
    ) as stream:
        rid = stream.response.headers["request-id"]
        with pytest.raises(anthropic_api_error()):
            async for event in stream:
                events.append(event.type)
    assert "message_stop" not in events
    row = await billing_stack.row(rid)
    assert row["status"] == "failed" and row["cost_micros"] == 0


def anthropic_api_error() -> type[Exception]:
    import anthropic

    return anthropic.APIError


async def test_budget_exceeded_is_403_and_nothing_goes_upstream(
    billing_stack: BillingStack,
) -> None:
    key_id, secret = await billing_stack.new_key("budgeted", monthly_budget_micros=5_000)
    # Spend this month already above the budget: $0.006 against $0.005.
    await billing_stack.fetch(
        "INSERT INTO usage_records (uid, request_id, key_id, model, api, stream, deployment,"
        " region, status, cost_micros, prices, received_at) VALUES ($1, $1, $2, $3, 'messages',"
        " false, 'sonnet-sim', 'local', 'complete', 6000, '{}'::jsonb, now())",
        f"req_{uuid.uuid4().hex}",
        key_id,
        "anthropic/claude-sonnet-5-5",
    )
    marker = uuid.uuid4().hex
    before = len(await billing_stack.sim_requests())
    async with aiohttp.ClientSession() as s:
        resp = await s.post(
            f"{billing_stack.url}/v1/messages",
            json={
                "model": MODEL,
                "max_tokens": 10,
                "messages": [{"role": "user", "content": marker}],
            },
            headers={"x-api-key": secret, "anthropic-version": "2023-06-01"},
        )
        body = await resp.json()
    assert resp.status == 403
    assert body["error"]["type"] == "permission_error"
    assert "monthly budget of $0.01" in body["error"]["message"]
    after = await billing_stack.sim_requests()
    assert not any(marker in json.dumps(r.get("body")) for r in after)
    assert len(after) == before
    # Another key without a budget is not affected.
    ok = await billing_stack.anthropic().messages.create(
        model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "hi [sim:tokens=2]"}]
    )
    assert ok.usage.output_tokens == 2


async def test_usage_api_json_and_csv(billing_stack: BillingStack) -> None:
    _, secret = await billing_stack.new_key("usage-api")
    client = billing_stack.anthropic(secret)
    ids = []
    for i in range(3):
        raw = await client.messages.with_raw_response.create(
            model=MODEL,
            max_tokens=50,
            messages=[{"role": "user", "content": f"n{i} [sim:tokens=5]"}],
        )
        ids.append(raw.headers["request-id"])
    for rid in ids:
        await billing_stack.row(rid)
    headers = {"x-api-key": secret}
    async with aiohttp.ClientSession() as s:
        for _ in range(100):  # until the edge's delivery confirmations are applied
            async with s.get(f"{billing_stack.url}/api/usage?limit=2", headers=headers) as r:
                page = await r.json()
            if page["totals"]["pending_requests"] == 0:
                break
            await asyncio.sleep(0.05)
        assert r.status == 200 and page["has_more"] is True
        assert page["totals"]["requests"] == 3 and page["totals"]["output_tokens"] == 15
        assert page["by_day"][0]["model"] == "anthropic/claude-sonnet-5-5"
        csv_headers = {**headers, "accept": "text/csv"}
        async with s.get(f"{billing_stack.url}/api/usage", headers=csv_headers) as r:
            text = await r.text()
            assert r.headers["content-type"].startswith("text/csv")
    table = list(csv.DictReader(io.StringIO(text)))
    assert sorted(t["request_id"] for t in table) == sorted(ids)
    assert all(t["status"] == "complete" and t["output_tokens"] == "5" for t in table)


async def test_billing_killed_during_200_streams_loses_and_doubles_nothing(
    billing_stack: BillingStack,
) -> None:
    client = billing_stack.anthropic(timeout=90.0)
    started = time.monotonic()

    async def one(i: int) -> tuple[str, bool]:
        async with client.messages.stream(
            model=MODEL,
            max_tokens=100,
            messages=[{"role": "user", "content": f"s{i} [sim:tokens=20 token_ms=60]"}],
        ) as stream:
            rid = stream.response.headers["request-id"]
            done = False
            try:
                async for event in stream:
                    if event.type == "message_stop":
                        done = True
            except Exception:
                done = False
            return rid, done

    tasks = [asyncio.create_task(one(i)) for i in range(200)]
    await asyncio.sleep(1.0)
    billing_stack.stack.kill("billing")  # SIGKILL; the supervisor restarts it
    results = await asyncio.gather(*tasks)
    elapsed = time.monotonic() - started
    completed = [rid for rid, done in results if done]
    ids = [rid for rid, _ in results]

    async def all_rows() -> bool:
        rows = await billing_stack.fetch(
            "SELECT request_id FROM usage_records WHERE request_id = ANY($1::text[])",
            completed,
        )
        return len(rows) == len(completed)

    await eventually(all_rows, timeout=30)
    rows = await billing_stack.fetch(
        "SELECT request_id, status FROM usage_records WHERE request_id = ANY($1::text[])", ids
    )
    by_id = {r["request_id"]: r["status"] for r in rows}
    assert len(rows) == len(by_id)  # one row per request id (the primary key)
    assert all(by_id[rid] == "complete" for rid in completed)
    # No charge without a completion: the only such row could be the documented window.
    assert set(by_id) == set(completed)
    # The outbox kept the records while billing was down: all 200 saw message_stop.
    assert len(completed) == 200, f"{200 - len(completed)} streams failed in {elapsed:.1f}s"
    billing = billing_stack.stack.children["billing"]

    async def restarted() -> bool:  # the supervisor's backoff (0.5 s) and poll (0.2 s) first
        return billing.restarts >= 1 and billing.alive

    await eventually(restarted, timeout=10)
    log_file = billing_stack.stack.data_dir / "logs" / "billing.log"

    async def drained_logged() -> bool:  # info lines reach the file within logs.FLUSH_AFTER
        return "stored" in log_file.read_text() and "from the outbox" in log_file.read_text()

    await eventually(drained_logged, timeout=5)


async def test_responses_view_agrees_with_the_record(billing_stack: BillingStack) -> None:
    async with openai.AsyncOpenAI(
        base_url=billing_stack.url + "/openai/v1", api_key=billing_stack.key, max_retries=0
    ) as client:
        raw = await client.responses.with_raw_response.create(
            model=MODEL, max_output_tokens=100, input="count [sim:tokens=17]", store=False
        )
    response = raw.parse()
    row = await billing_stack.row(raw.headers["request-id"])
    assert response.usage is not None
    assert response.usage.input_tokens == (
        row["input_tokens"]
        + row["cache_read_tokens"]
        + row["cache_write_5m_tokens"]
        + row["cache_write_1h_tokens"]
    )
    assert response.usage.input_tokens_details.cached_tokens == row["cache_read_tokens"]
    assert response.usage.output_tokens == row["output_tokens"] == 17
    assert row["api"] == "responses" and row["cost_micros"] == cost_by_hand(row)


async def test_a_responses_stream_closed_early_pays_for_about_what_was_produced(
    billing_stack: BillingStack,
) -> None:
    n = 10
    body = {
        "model": MODEL,
        "stream": True,
        "store": False,
        "input": "slow [sim:tokens=200 token_ms=40]",
    }
    headers = {"authorization": f"Bearer {billing_stack.key}"}
    deltas = 0
    async with (
        aiohttp.ClientSession() as s,
        s.post(f"{billing_stack.url}/openai/v1/responses", json=body, headers=headers) as resp,
    ):
        rid = resp.headers["request-id"]
        async for line in resp.content:
            if line == b"event: response.output_text.delta\n":
                deltas += 1
                if deltas >= n:
                    break
        resp.close()
    row = await billing_stack.row(rid)
    assert row["status"] == "client_closed" and row["estimated"] is True
    assert n <= row["output_tokens"] <= n + 15
    assert row["cost_micros"] == cost_by_hand(row)
