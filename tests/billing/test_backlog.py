"""The usage outbox's backlog gauges (backlog.py): real NATS and PostgreSQL, billing running while
it cannot store (its table locked), then draining."""

from __future__ import annotations

import asyncio
import time
import uuid

import asyncpg
import nats
import pytest
from ezat_billing import backlog
from ezat_billing.backlog import Backlog
from ezat_common import envelopes
from ezat_common.outbox import Outbox
from ezat_common.subjects import Subjects
from prometheus_client import REGISTRY

from .factories import count_rows, record
from .test_app import running_billing, wait_ready

MESSAGES = "ezat_billing_outbox_messages"
AGE = "ezat_billing_outbox_oldest_message_age_seconds"


def gauge(name: str) -> float | None:
    return REGISTRY.get_sample_value(name)


async def eventually(name: str, wanted: float, within: float) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + within
    while gauge(name) != wanted and loop.time() < end:
        await asyncio.sleep(0.05)
    assert gauge(name) == wanted


async def test_the_gauges_show_the_backlog_while_billing_cannot_store_and_drop_to_zero_after(
    nats_url: str,
    database_url: str,
    pool: asyncpg.Pool,
    monkeypatch: pytest.MonkeyPatch,
    key_id: str,
) -> None:
    monkeypatch.setattr(backlog, "READ_EVERY", 0.1)
    async with running_billing(nats_url, database_url, monkeypatch) as running:
        await wait_ready(running)
        await Outbox(running.nc, running.subjects).ensure_stream()
        await eventually(MESSAGES, 0, within=2)
        js = running.nc.jetstream()
        async with pool.acquire() as blocker, blocker.transaction():
            # The drain's INSERTs wait on the lock and time out: nothing is stored meanwhile.
            await blocker.execute("LOCK TABLE usage_records IN EXCLUSIVE MODE")
            first = time.time()
            for _ in range(5):
                rec = record(key_id=key_id, status="client_closed", uid=uuid.uuid4().hex)
                await js.publish(
                    running.subjects.usage_outbox,
                    envelopes.encode(rec),
                    headers={"Nats-Msg-Id": rec.uid},
                )
            await asyncio.sleep(1.5)
            await eventually(MESSAGES, 5, within=2)
            age = gauge(AGE)
            assert age is not None and 1.5 - 0.2 <= age <= time.time() - first + 0.2
            assert await count_rows(pool, key_id) == 0
        # The lock is gone: the drain's retry stores them and the outbox empties.
        await eventually(MESSAGES, 0, within=10)
        await eventually(AGE, 0, within=1)
        assert await count_rows(pool, key_id) == 5


async def test_a_stream_not_created_yet_reads_as_an_empty_outbox(nats_url: str) -> None:
    nc = await nats.connect(nats_url)
    try:
        reader = Backlog(nc, Subjects(f"t{uuid.uuid4().hex[:8]}"))
        reader.messages, reader.oldest = 3, time.time() - 10
        await reader.read()
        assert (reader.messages, reader.oldest, gauge(MESSAGES), gauge(AGE)) == (0, None, 0, 0)
    finally:
        await nc.close()
