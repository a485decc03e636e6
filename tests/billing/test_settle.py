"""Billed only when delivered (docs/billing.md): a complete record is charged for good once the
edge confirmed its delivery, and re-marked failed, cost 0, when the confirmation never came.
Real PostgreSQL; the settling query is the one billing runs every few seconds."""

from __future__ import annotations

import asyncio
import functools
import time
import uuid

import asyncpg
import msgspec
import nats
import pytest
from ezat_billing import settle, store
from ezat_common import envelopes, outbox
from ezat_common.envelopes import Delivered
from ezat_common.outbox import Outbox
from ezat_common.redis_keys import RedisKeys
from ezat_common.spend_counter import SpendCounter, key_scope, month_of, team_scope
from ezat_common.subjects import Subjects
from ezat_edge.holds import HoldStore, Scope
from redis import asyncio as aioredis

from .factories import record, row

AFTER = 60.0


async def age(pool: asyncpg.Pool, key_id: str, seconds: float) -> None:
    """As if the key's rows had been stored ``seconds`` ago."""
    await pool.execute(
        "UPDATE usage_records SET recorded_at = now() - make_interval(secs => $2)"
        " WHERE key_id = $1",
        key_id,
        seconds,
    )


async def rows_of(pool: asyncpg.Pool, key_id: str) -> dict[str, tuple[str, int, str | None]]:
    found = await pool.fetch(
        "SELECT request_id, status, cost_micros, error_type FROM usage_records WHERE key_id = $1",
        key_id,
    )
    return {r["request_id"]: (r["status"], r["cost_micros"], r["error_type"]) for r in found}


async def test_only_complete_records_await_their_delivery(pool: asyncpg.Pool, key_id: str) -> None:
    statuses = ("complete", "client_closed", "failed")
    rows = [row(key_id=key_id, request_id=s, status=s) for s in statuses]
    await store.insert_batch(pool, rows)
    awaiting = await pool.fetch(
        "SELECT request_id FROM usage_records WHERE key_id = $1 AND awaiting_delivery", key_id
    )
    assert [r["request_id"] for r in awaiting] == ["complete"]


async def test_past_the_bound_an_unconfirmed_record_is_voided_a_confirmed_one_kept(
    pool: asyncpg.Pool, key_id: str
) -> None:
    delivered = row(key_id=key_id, request_id="delivered")
    lost = row(key_id=key_id, request_id="lost")
    closed = row(key_id=key_id, request_id="closed", status="client_closed", estimated=True)
    await store.insert_batch(pool, [delivered, lost, closed])
    await settle.confirm(pool, [delivered.uid])
    cost = delivered.cost_micros
    assert cost > 0

    await settle_due_for(pool, key_id, within=True)
    # Within the bound nothing changes: a confirmation may still be on its way.
    before = await rows_of(pool, key_id)
    assert before["lost"] == ("complete", cost, None)

    await age(pool, key_id, AFTER + 1)
    await settle_due_for(pool, key_id, within=False)
    after = await rows_of(pool, key_id)
    assert after["delivered"] == ("complete", cost, None)
    assert after["lost"] == ("failed", 0, "undelivered")
    assert after["closed"] == before["closed"]  # an early close is billed as recorded
    # Idempotent: settled rows are not settled again.
    assert await settle.settle_due(pool, AFTER, time.time()) == (0, 0)
    assert await rows_of(pool, key_id) == after


async def settle_due_for(pool: asyncpg.Pool, key_id: str, within: bool) -> None:
    """Settle, and check what this key's rows contributed (other tests share the table)."""
    awaiting = await pool.fetchval(
        "SELECT count(*) FROM usage_records WHERE key_id = $1 AND awaiting_delivery", key_id
    )
    await settle.settle_due(pool, AFTER, time.time())
    left = await pool.fetchval(
        "SELECT count(*) FROM usage_records WHERE key_id = $1 AND awaiting_delivery", key_id
    )
    assert left == (awaiting if within else 0)


async def test_a_confirmation_that_overtook_its_record_still_counts(
    pool: asyncpg.Pool, key_id: str
) -> None:
    early = row(key_id=key_id, request_id="early")
    await settle.confirm(pool, [early.uid, early.uid])  # twice: idempotent
    await store.insert_batch(pool, [early])
    await age(pool, key_id, AFTER + 1)
    await settle.settle_due(pool, AFTER, time.time())
    assert (await rows_of(pool, key_id))["early"] == ("complete", early.cost_micros, None)


async def test_a_confirmation_held_in_the_outbox_holds_its_record_back(
    nats_url: str, pool: asyncpg.Pool, key_id: str
) -> None:
    """PostgreSQL (or billing) went away after a record was stored and before its confirmation,
    published just after it, was drained: the record's confirmation time runs out while the
    confirmation waits in the outbox. It must not be voided; it is settled once the drain applied
    the confirmation. (Before, the first settling round after the outage voided it.)"""
    after = 1.0
    subjects = Subjects(f"t{uuid.uuid4().hex[:8]}")
    nc = await nats.connect(nats_url)
    try:
        box = Outbox(nc, subjects)
        await box.ensure_stream()
        assert await outbox.drained_before(nc, subjects) == pytest.approx(time.time(), abs=1)
        stored = row(key_id=key_id, request_id="stored-before-the-outage", uid=uuid.uuid4().hex)
        await store.insert_batch(pool, [stored])
        js = nc.jetstream()
        data = envelopes.encode(Delivered(uids=[stored.uid]))
        ack = await js.publish(subjects.usage_outbox, data, stream=subjects.outbox_stream)
        published = time.time()
        await asyncio.sleep(after + 0.5)  # its confirmation time is up, the drain is stuck

        drained = functools.partial(outbox.drained_before, nc, subjects)
        assert await drained() == pytest.approx(published, abs=0.5)
        await settle.settle_round(pool, after, drained)
        assert (await rows_of(pool, key_id))["stored-before-the-outage"] == (
            "complete", stored.cost_micros, None
        )  # fmt: skip
        awaiting = "SELECT awaiting_delivery FROM usage_records WHERE uid = $1"
        assert await pool.fetchval(awaiting, stored.uid)

        # The outage ends: the drain applies the confirmation and removes it from the outbox.
        await settle.confirm(pool, [stored.uid])
        await js.delete_msg(subjects.outbox_stream, ack.seq)
        assert await drained() == pytest.approx(time.time(), abs=1)
        await settle.settle_round(pool, after, drained)
        assert not await pool.fetchval(awaiting, stored.uid)
        assert (await rows_of(pool, key_id))["stored-before-the-outage"][0] == "complete"
    finally:
        await nc.jetstream().delete_stream(subjects.outbox_stream)
        await nc.close()


async def test_an_unconfirmed_record_is_voided_once_the_outbox_is_drained_past_it(
    pool: asyncpg.Pool, key_id: str
) -> None:
    lost = row(key_id=key_id, request_id="lost", uid=uuid.uuid4().hex)
    await store.insert_batch(pool, [lost])
    await age(pool, key_id, AFTER + 1)
    # The drain is behind (the outbox holds a message of two minutes ago): not yet.
    await settle.settle_due(pool, AFTER, time.time() - 120)
    assert (await rows_of(pool, key_id))["lost"][0] == "complete"
    await settle.settle_due(pool, AFTER, time.time())
    assert (await rows_of(pool, key_id))["lost"] == ("failed", 0, "undelivered")


def test_the_outbox_decoder_tells_records_from_confirmations() -> None:
    rec = record()
    assert envelopes.decode_outbox(envelopes.encode(rec)) == rec
    assert envelopes.decode_outbox(envelopes.encode(Delivered(uids=["a"]))) == Delivered(uids=["a"])
    with pytest.raises(msgspec.ValidationError):
        envelopes.decode_outbox(envelopes.encode(envelopes.HealthReply(service="x", ok=True)))


async def test_a_record_settled_undelivered_no_longer_spends_its_budgets(
    pool: asyncpg.Pool, key_id: str, redis_url: str
) -> None:
    """A complete record counted in its key's and team's monthly spend (the hold's scopes) is
    taken back from both once it is settled undelivered; a confirmed one stays counted; a second
    settling, or the row stored again, changes nothing (docs/billing.md, "Budget holds")."""
    keys = RedisKeys(f"uncount{uuid.uuid4().hex[:8]}")
    client = aioredis.from_url(redis_url)
    try:
        counter, holds = SpendCounter(client, keys), HoldStore(client, keys)
        month = month_of(time.time())
        scopes = [Scope(key_scope(key_id), 10**9, 0), Scope(team_scope("t1"), 10**9, 0)]
        delivered = row(key_id=key_id, request_id="delivered", uid=uuid.uuid4().hex)
        lost = row(key_id=key_id, request_id="lost", uid=uuid.uuid4().hex)
        for r in (delivered, lost):
            assert await holds.reserve(r.uid, scopes, 10**6, month, time.time() + 60) is None
        stored = await store.insert_batch(pool, [delivered, lost])
        counted = [(r.uid, key_id, stored[r.uid].cost_micros, r.received_at.timestamp(), None)
                   for r in (delivered, lost)]  # fmt: skip
        await counter.count(counted)
        both = delivered.cost_micros + lost.cost_micros

        async def spend() -> list[int]:
            values = [await client.get(keys.spend(s.name, month)) for s in scopes]
            return [int(v or 0) for v in values]

        assert await spend() == [both, both]
        await settle.confirm(pool, [delivered.uid])
        await age(pool, key_id, AFTER + 1)
        assert await settle.settle_due(pool, AFTER, time.time(), uncount=counter.uncount) == (0, 1)
        assert await spend() == [delivered.cost_micros, delivered.cost_micros]
        await counter.uncount([counted[1]])  # taken back once
        await counter.count([counted[1]])  # a late redelivery of its row: not counted again
        assert await spend() == [delivered.cost_micros, delivered.cost_micros]
    finally:
        await client.aclose()
