"""A row billing stored but did not count (it was killed between the COMMIT and the count, so
the outbox message was never acknowledged) is counted when the message is redelivered: the
INSERT finds it stored, and the count still runs, once (docs/billing.md, "Under faults").
Real PostgreSQL and Redis; ``counted_insert`` is the writer of billing's live path and drain."""

from __future__ import annotations

import time
import uuid

import asyncpg
from ezat_billing import store
from ezat_billing.app import counted_insert
from ezat_common.redis_keys import RedisKeys
from ezat_common.spend_counter import SpendCounter, key_scope, month_of
from ezat_edge.holds import HoldStore, Scope
from redis import asyncio as aioredis

from .factories import row


async def test_a_row_stored_before_a_kill_is_counted_on_its_redelivery_once(
    pool: asyncpg.Pool, key_id: str, redis_url: str
) -> None:
    keys = RedisKeys(f"recount{uuid.uuid4().hex[:8]}")
    client = aioredis.from_url(redis_url)
    try:
        counter, holds = SpendCounter(client, keys), HoldStore(client, keys)
        month = month_of(time.time())
        scope = key_scope(key_id)
        stored = row(key_id=key_id, request_id="killed", uid=uuid.uuid4().hex)
        assert await holds.reserve(stored.uid, [Scope(scope, 10**9, 0)], 10**6, month,
                                   time.time() + 60) is None  # fmt: skip
        await store.insert_batch(pool, [stored])  # the killed process's COMMIT, never counted
        assert await client.hlen(keys.holds(scope)) == 1

        write = counted_insert(pool, None, counter)
        for _ in range(2):  # the redelivery, then a second one
            again = await write([stored])
            assert not again[stored.uid].inserted
            assert int(await client.get(keys.spend(scope, month)) or 0) == stored.cost_micros
            assert await client.hlen(keys.holds(scope)) == 0
        assert stored.cost_micros > 0
    finally:
        await client.aclose()
