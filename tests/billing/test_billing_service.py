"""The whole service over real NATS and PostgreSQL: acks, the usage page, health, stopping."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import asyncpg
import msgspec
import nats
import pytest
import pytest_asyncio
from ezat_billing import app, config
from ezat_cli.infra import free_port
from ezat_common import envelopes
from ezat_common.config import parse_config
from ezat_common.envelopes import UsageAck, UsageQuery
from ezat_common.subjects import Subjects
from nats.aio.client import Client

from .factories import count_rows, record

CONFIG = """
[[models]]
id = "anthropic/claude-sonnet-5-5"
aliases = ["claude-sonnet-5-5"]
context_window = 200000
max_output_tokens = 64000
price = { input = 3.0, output = 15.0 }  # cache prices from the default multipliers
"""

ITEM_KEYS = [
    "request_id",
    "model",
    "api",
    "stream",
    "status",
    "deployment",
    "region",
    "input_tokens",
    "cache_read_tokens",
    "cache_write_5m_tokens",
    "cache_write_1h_tokens",
    "output_tokens",
    "reasoning_tokens",
    "estimated",
    "cost_micros",
    "cost_usd",
    "received_at",
    "ttft_ms",
    "total_ms",
]


@dataclass
class Running:
    nc: Client
    subjects: Subjects
    stop: asyncio.Event
    task: asyncio.Task[None]

    async def record(self, data: bytes) -> UsageAck:
        msg = await self.nc.request(self.subjects.usage_record, data, timeout=5)
        return envelopes.decode_usage_ack(msg.data)

    async def query(self, **fields: Any) -> dict[str, Any]:
        data = envelopes.encode(UsageQuery(**fields))
        msg = await self.nc.request(self.subjects.usage_query, data, timeout=5)
        result: dict[str, Any] = msgspec.json.decode(msg.data)
        return result


@contextlib.asynccontextmanager
async def running_billing(
    nats_url: str, database_url: str, monkeypatch: pytest.MonkeyPatch, ack_deadline: float = 2.0
) -> AsyncIterator[Running]:
    prefix = f"t{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("NATS_URL", nats_url)
    monkeypatch.setenv("DATABASE_URL", database_url)
    monkeypatch.setenv("EZAT_SUBJECT_PREFIX", prefix)
    settings = config.from_config(parse_config(CONFIG), ack_deadline=ack_deadline)
    stop = asyncio.Event()
    task = asyncio.create_task(app.serve(stop, settings))
    nc = await nats.connect(nats_url)
    try:
        yield Running(nc, Subjects(prefix), stop, task)
    finally:
        stop.set()
        await asyncio.wait_for(task, 15)
        await nc.close()


@pytest_asyncio.fixture
async def billing(
    nats_url: str, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Running]:
    async with running_billing(nats_url, database_url, monkeypatch) as running:
        await wait_ready(running)
        yield running


async def health(running: Running) -> envelopes.HealthReply | None:
    try:
        msg = await running.nc.request(running.subjects.health("billing"), b"", timeout=0.5)
    except (nats.errors.NoRespondersError, nats.errors.TimeoutError):
        return None  # not subscribed yet
    return envelopes.decode_health(msg.data)


async def wait_ready(running: Running) -> None:
    for _ in range(100):
        reply = await health(running)
        if reply is not None and reply.ok:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("billing never became ready")


async def test_record_is_acknowledged_with_its_cost_once(billing: Running, key_id: str) -> None:
    rec = record(key_id=key_id, input_tokens=1000, output_tokens=500)
    data = envelopes.encode(rec)
    acks = await asyncio.gather(*(billing.record(data) for _ in range(3)))
    assert {(a.request_id, a.ok, a.cost_micros) for a in acks} == {(rec.request_id, True, 10_500)}
    page = await billing.query(key_id=key_id)
    assert [d["request_id"] for d in page["data"]] == [rec.request_id]


async def test_alias_is_priced_and_unknown_model_is_stored_free(
    billing: Running, key_id: str
) -> None:
    alias = await billing.record(envelopes.encode(record(key_id=key_id, model="claude-sonnet-5-5")))
    unknown = await billing.record(envelopes.encode(record(key_id=key_id, model="mystery/model")))
    assert alias.ok and alias.cost_micros == 4_500
    assert unknown.ok and unknown.cost_micros == 0
    page = await billing.query(key_id=key_id)
    assert page["totals"]["requests"] == 2


async def test_invalid_records_are_refused_not_stored(billing: Running, key_id: str) -> None:
    garbage = await billing.record(b"\x00not msgpack")
    assert not garbage.ok and garbage.error and garbage.error.startswith("invalid usage record")
    negative = await billing.record(envelopes.encode(record(key_id=key_id, input_tokens=-5)))
    assert not negative.ok and negative.error and negative.error.startswith("input_tokens: ")
    assert (await billing.query(key_id=key_id))["data"] == []


async def test_usage_page_shape(billing: Running, key_id: str) -> None:
    rec = record(key_id=key_id, reasoning_tokens=7, output_tokens=100, estimated=True)
    assert (await billing.record(envelopes.encode(rec))).ok
    page = await billing.query(key_id=key_id, limit=10)
    assert list(page) == ["object", "data", "totals", "by_day", "has_more", "next_cursor"]
    assert page["object"] == "list" and page["has_more"] is False and page["next_cursor"] is None
    item = page["data"][0]
    assert list(item) == ITEM_KEYS
    assert item["received_at"].endswith("Z") and item["estimated"] is True
    assert item["reasoning_tokens"] == 7 and item["cost_micros"] == 4_500
    assert item["cost_usd"] == 0.0045
    assert list(page["totals"]) == [
        "requests",
        "input_tokens",
        "cache_read_tokens",
        "cache_write_5m_tokens",
        "cache_write_1h_tokens",
        "output_tokens",
        "reasoning_tokens",
        "cost_micros",
        "cost_usd",
    ]
    [day] = page["by_day"]
    assert list(day) == ["day", "model", "requests", "input_tokens", "output_tokens", "cost_micros"]
    assert day["requests"] == 1 and day["cost_micros"] == 4_500


async def test_pagination_over_nats_and_model_alias_filter(billing: Running, key_id: str) -> None:
    for i in range(3):
        rec = record(key_id=key_id, received_at=1_750_000_000.0 + i)
        assert (await billing.record(envelopes.encode(rec))).ok
    first = await billing.query(key_id=key_id, limit=2, model="Claude-Sonnet-5-5 ")
    assert len(first["data"]) == 2 and first["has_more"] is True
    second = await billing.query(key_id=key_id, limit=2, cursor=first["next_cursor"])
    assert len(second["data"]) == 1 and second["has_more"] is False
    assert second["totals"]["requests"] == 3


async def test_invalid_cursor_answers_an_error(billing: Running, key_id: str) -> None:
    assert await billing.query(key_id=key_id, cursor="forged") == {
        "error": "cursor: not a cursor this API returned"
    }


async def test_stopping_answers_the_records_already_received(
    billing: Running, pool: asyncpg.Pool, key_id: str
) -> None:
    records = [record(key_id=key_id) for _ in range(50)]
    async with pool.acquire() as blocker, blocker.transaction():
        # Hold writes back so that the records are still in flight when the stop comes.
        await blocker.execute("LOCK TABLE usage_records IN EXCLUSIVE MODE")
        acks = [asyncio.create_task(billing.record(envelopes.encode(r))) for r in records]
        await asyncio.sleep(0.3)
        assert not any(a.done() for a in acks)
        billing.stop.set()
        await asyncio.sleep(0.2)
    answered = await asyncio.gather(*acks)
    assert all(a.ok for a in answered)
    await asyncio.wait_for(billing.task, 15)
    assert await count_rows(pool, key_id) == 50


async def test_without_postgresql_it_runs_not_ready_and_charges_nothing(
    nats_url: str, monkeypatch: pytest.MonkeyPatch, key_id: str
) -> None:
    closed = f"postgresql://postgres@127.0.0.1:{free_port()}/nothing"
    async with running_billing(nats_url, closed, monkeypatch, ack_deadline=0.3) as running:
        reply = None
        for _ in range(100):
            reply = await health(running)
            if reply is not None:
                break
            await asyncio.sleep(0.05)
        assert reply is not None and not reply.ok and reply.detail == "postgresql: unreachable"
        ack = await running.record(envelopes.encode(record(key_id=key_id)))
        assert not ack.ok and ack.error and "not charged" in ack.error
        page = await running.query(key_id=key_id)
        assert page == {"error": "usage: the usage store is unavailable; retry shortly"}
        assert not running.task.done()  # still serving, waiting for PostgreSQL
