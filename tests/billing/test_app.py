"""The whole service over real NATS and PostgreSQL: acks, the usage page, health, stopping."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import asyncpg
import msgspec
import nats
import nats.js.errors
import pytest
import pytest_asyncio
from ezat_billing import app, config, settle
from ezat_cli.infra import free_port
from ezat_common import envelopes, usage_page
from ezat_common.config import Config
from ezat_common.envelopes import Delivered, UsageAck, UsageQuery
from ezat_common.outbox import Outbox
from ezat_common.subjects import Subjects
from ezat_common.usage_page import UsageError, UsagePage
from nats.aio.client import Client
from support.config import SONNET, model, parsed

from .factories import count_rows, record
from .test_settle import age, rows_of

# Cache prices from the default multipliers.
CONFIG = parsed(models=[model(SONNET, aliases=["claude-sonnet-5-5"])])

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
    # Issue 16, appended (the public shape only grows).
    "deployment_kind",
    "web_search_requests",
    "web_fetch_requests",
    # Issue 28, appended: attribution (docs/billing.md, "Attribution").
    "team_id",
    "user",
    "tags",
    "session",
    "client",
]


def charged_or_pending(page: dict[str, Any], name: str = "requests") -> int:
    """A record nobody confirmed the delivery of is pending, counted apart from the charges."""
    t = page["totals"]
    return int(t[name] + t["pending_" + name])


@dataclass
class Running:
    nc: Client
    subjects: Subjects
    stop: asyncio.Event
    task: asyncio.Task[None]

    async def record(self, data: bytes) -> UsageAck:
        msg = await self.nc.request(self.subjects.usage_record, data, timeout=5)
        return envelopes.decode_usage_ack(msg.data)

    async def reply(self, **fields: Any) -> usage_page.UsageReply:
        data = envelopes.encode(UsageQuery(**fields))
        msg = await self.nc.request(self.subjects.usage_query, data, timeout=5)
        return usage_page.decode_usage_reply(msg.data)

    async def query(self, **fields: Any) -> dict[str, Any]:
        """The page as its client sees it: the JSON body of ``GET /api/usage``."""
        reply = await self.reply(**fields)
        assert isinstance(reply, UsagePage), reply
        result: dict[str, Any] = msgspec.json.decode(usage_page.usage_page_json(reply))
        return result


@contextlib.asynccontextmanager
async def running_billing(
    nats_url: str,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    ack_deadline: float = 2.0,
    cfg: Config = CONFIG,
) -> AsyncIterator[Running]:
    prefix = f"t{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("NATS_URL", nats_url)
    monkeypatch.setenv("DATABASE_URL", database_url)
    monkeypatch.setenv("EZAT_SUBJECT_PREFIX", prefix)
    settings = config.from_config(cfg, ack_deadline=ack_deadline)
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


async def wait_ready(running: Running, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
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
    assert charged_or_pending(page) == 2


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
        "web_search_requests",
        "web_fetch_requests",
        "pending_requests",
        "pending_cost_micros",
    ]
    # No edge confirmed its delivery: pending, not a charge (docs/billing.md, "Pending rows").
    assert item["status"] == "pending"
    assert page["totals"]["pending_cost_micros"] == 4_500 and page["totals"]["cost_micros"] == 0
    [day] = page["by_day"]
    assert list(day) == ["day", "model", "requests", "input_tokens", "output_tokens", "cost_micros"]
    assert day["requests"] == 0 and day["cost_micros"] == 0


async def test_pagination_over_nats_and_model_alias_filter(billing: Running, key_id: str) -> None:
    for i in range(3):
        rec = record(key_id=key_id, received_at=1_750_000_000.0 + i)
        assert (await billing.record(envelopes.encode(rec))).ok
    first = await billing.query(key_id=key_id, limit=2, model="Claude-Sonnet-5-5 ")
    assert len(first["data"]) == 2 and first["has_more"] is True
    second = await billing.query(key_id=key_id, limit=2, cursor=first["next_cursor"])
    assert len(second["data"]) == 1 and second["has_more"] is False
    assert charged_or_pending(second) == 3


async def test_invalid_cursor_answers_an_error(billing: Running, key_id: str) -> None:
    assert await billing.reply(key_id=key_id, cursor="forged") == UsageError(
        error="cursor: not a cursor this API returned"
    )


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


async def test_without_postgresql_the_record_is_acknowledged_through_the_outbox(
    nats_url: str, monkeypatch: pytest.MonkeyPatch, key_id: str
) -> None:
    closed = f"postgresql://postgres@127.0.0.1:{free_port()}/nothing"
    async with running_billing(nats_url, closed, monkeypatch, ack_deadline=0.3) as running:
        # Ready all the same: the outbox makes records durable (docs/reliability.md, "Readiness"),
        # once its first backlog reading (2 s after the start) succeeded.
        await wait_ready(running, timeout=15.0)
        rec = record(key_id=key_id)
        ack = await running.record(envelopes.encode(rec))
        assert ack.ok and ack.cost_micros == 4_500
        # Durable in JetStream, waiting for PostgreSQL (the drain naks and retries meanwhile).
        info = await running.nc.jetstream().stream_info(running.subjects.outbox_stream)
        assert info.state.messages == 1
        reply = await running.reply(key_id=key_id)
        assert reply == UsageError(error="usage: the usage store is unavailable; retry shortly")
        assert not running.task.done()  # still serving, waiting for PostgreSQL


async def test_without_postgresql_nor_outbox_it_charges_nothing(
    nats_url: str, monkeypatch: pytest.MonkeyPatch, key_id: str
) -> None:
    closed = f"postgresql://postgres@127.0.0.1:{free_port()}/nothing"
    async with running_billing(nats_url, closed, monkeypatch, ack_deadline=0.3) as running:
        # A stream of the outbox's name that does not take the outbox subject: publishes fail.
        # Billing may have made its outbox already (its start races this line): then changed.
        js = running.nc.jetstream()
        wrong = [f"{running.subjects.prefix}.other"]
        try:
            await js.add_stream(name=running.subjects.outbox_stream, subjects=wrong)
        except nats.js.errors.BadRequestError:
            await js.update_stream(name=running.subjects.outbox_stream, subjects=wrong)
        await wait_subscribed(running)
        ack = await running.record(envelopes.encode(record(key_id=key_id)))
        assert not ack.ok and ack.error and "not charged" in ack.error


async def test_same_usage_published_three_times_is_one_row(
    billing: Running, pool: asyncpg.Pool, key_id: str
) -> None:
    """Request/reply, a plain publish (no reply) and the outbox: one row, one cost."""
    rec = record(key_id=key_id, input_tokens=2000, output_tokens=10)
    data = envelopes.encode(rec)
    js = billing.nc.jetstream()
    ack = await billing.record(data)
    await billing.nc.publish(billing.subjects.usage_record, data)
    headers = {"Nats-Msg-Id": rec.request_id}
    await js.publish(billing.subjects.usage_outbox, data, headers=headers)
    # A redelivery-like duplicate that the stream's duplicate window does not catch (new id).
    await js.publish(billing.subjects.usage_outbox, data, headers={"Nats-Msg-Id": "other"})
    assert ack.ok and ack.cost_micros == 6_150
    for _ in range(100):
        info = await js.stream_info(billing.subjects.outbox_stream)
        if info.state.messages == 0:  # drained: work-queue messages go once acknowledged
            break
        await asyncio.sleep(0.05)
    assert info.state.messages == 0
    assert await count_rows(pool, key_id) == 1
    cost = await pool.fetchval("SELECT cost_micros FROM usage_records WHERE key_id=$1", key_id)
    assert cost == 6_150


async def test_outbox_records_are_stored_when_billing_starts(
    nats_url: str, database_url: str, pool: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the router publishes while no billing replica runs is stored when one starts."""
    key_id = f"key_{uuid.uuid4().hex[:12]}"
    prefix = f"t{uuid.uuid4().hex[:8]}"
    subjects = Subjects(prefix)
    nc = await nats.connect(nats_url)
    try:
        outbox = Outbox(nc, subjects)
        records = [record(key_id=key_id) for _ in range(20)]
        for rec in records:
            assert await outbox.put(rec.request_id, envelopes.encode(rec), timeout=2)
    finally:
        await nc.close()
    monkeypatch.setenv("NATS_URL", nats_url)
    monkeypatch.setenv("DATABASE_URL", database_url)
    monkeypatch.setenv("EZAT_SUBJECT_PREFIX", prefix)
    stop = asyncio.Event()
    task = asyncio.create_task(app.serve(stop, config.from_config(CONFIG)))
    try:
        for _ in range(100):
            if await count_rows(pool, key_id) == 20:
                break
            await asyncio.sleep(0.05)
        assert await count_rows(pool, key_id) == 20
    finally:
        stop.set()
        await asyncio.wait_for(task, 15)


async def wait_subscribed(running: Running) -> None:
    for _ in range(100):
        if await health(running) is not None:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("billing never subscribed")


async def test_same_request_id_different_uids_are_two_rows_same_uid_one(
    billing: Running, pool: asyncpg.Pool, key_id: str
) -> None:
    """The key is the uid: a reused x-request-id is billed per request, a retried record once."""
    first = record(key_id=key_id, request_id="req-reused", uid=uuid.uuid4().hex)
    second = record(key_id=key_id, request_id="req-reused", uid=uuid.uuid4().hex)
    acks = [await billing.record(envelopes.encode(r)) for r in (first, second, first, second)]
    assert all(a.ok for a in acks)
    assert [a.cost_micros for a in acks] == [4_500] * 4
    # The outbox de-duplicates on the uid too: the same uid again is one message, one row.
    js = billing.nc.jetstream()
    await js.publish(
        billing.subjects.usage_outbox, envelopes.encode(first), headers={"Nats-Msg-Id": first.uid}
    )
    for _ in range(100):
        info = await js.stream_info(billing.subjects.outbox_stream)
        if info.state.messages == 0:
            break
        await asyncio.sleep(0.05)
    assert await count_rows(pool, key_id) == 2
    page = await billing.query(key_id=key_id)
    assert [d["request_id"] for d in page["data"]] == ["req-reused", "req-reused"]
    assert charged_or_pending(page, "cost_micros") == 9_000


async def test_stops_promptly_after_the_outbox_drain_has_idled(
    nats_url: str, database_url: str, pool: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A drain that stored a record and then waited through empty fetches must not hold the
    stop back (it once sat in the NATS client's 30 s drain until Kubernetes would SIGKILL it)."""
    key_id = f"key_{uuid.uuid4().hex[:12]}"
    async with running_billing(nats_url, database_url, monkeypatch) as running:
        await wait_subscribed(running)
        rec = record(key_id=key_id)
        await running.nc.jetstream().publish(
            running.subjects.usage_outbox, envelopes.encode(rec), headers={"Nats-Msg-Id": rec.uid}
        )
        for _ in range(100):
            if await count_rows(pool, key_id) == 1:
                break
            await asyncio.sleep(0.05)
        assert await count_rows(pool, key_id) == 1
        await asyncio.sleep(2.5)  # the drain's 1 s fetches time out, empty, twice
        running.stop.set()
        started = asyncio.get_running_loop().time()
        await asyncio.wait_for(asyncio.shield(running.task), 20)
        assert asyncio.get_running_loop().time() - started < 3.0


@pytest.mark.parametrize("order", ["record_first", "confirmation_first"])
async def test_the_drain_stores_records_and_confirmations_from_the_outbox(
    billing: Running, pool: asyncpg.Pool, key_id: str, order: str
) -> None:
    rec = record(key_id=key_id, request_id=f"r-{uuid.uuid4().hex[:8]}", uid=uuid.uuid4().hex)
    # As every producer does before it publishes (billing's drain may still be creating it).
    await Outbox(billing.nc, billing.subjects).ensure_stream()
    js = billing.nc.jetstream()
    messages = [
        (envelopes.encode(rec), rec.uid),
        (envelopes.encode(Delivered(uids=[rec.uid])), f"delivered-{rec.uid}"),
    ]
    if order == "confirmation_first":
        messages.reverse()
    for data, msg_id in messages:
        await js.publish(billing.subjects.usage_outbox, data, headers={"Nats-Msg-Id": msg_id})
    for _ in range(100):
        info = await js.stream_info(billing.subjects.outbox_stream)
        if info.state.messages == 0:
            break
        await asyncio.sleep(0.05)
    assert info.state.messages == 0
    # Confirmed either way: its flag cleared at once, or the confirmation kept for its record.
    state = await pool.fetchrow(
        "SELECT awaiting_delivery,"
        " EXISTS (SELECT 1 FROM usage_deliveries d WHERE d.uid = $1) AS kept"
        " FROM usage_records WHERE uid = $1",
        rec.uid,
    )
    assert not state["awaiting_delivery"] or state["kept"]
    await age(pool, key_id, 61)
    await settle.settle_due(pool, 60, time.time())
    assert (await rows_of(pool, key_id))[rec.request_id][0] == "complete"
