"""holds.py and ezat_common/spend_counter.py against a real Redis: a hold fits on every scope or
none, expires, is replaced by its row (counted once), and the counter and the reported spend
both bound it (docs/billing.md, "Budget holds")."""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from ezat_cli.infra import free_port, start_redis
from ezat_common import kv
from ezat_common.redis_keys import RedisKeys
from ezat_common.spend_counter import SpendCounter, month_of
from ezat_edge.holds import HoldStore, Refused, Scope
from redis import asyncio as aioredis


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.from_url(redis_url)
    try:
        yield client
    finally:
        await client.aclose()


@pytest.fixture
def keys() -> RedisKeys:
    return RedisKeys("holdtest" + secrets.token_hex(4))


def later() -> float:
    return time.time() + 60


MONTH = month_of(time.time())


async def test_a_hold_fits_on_every_scope_or_on_none(
    redis: aioredis.Redis, keys: RedisKeys
) -> None:
    store = HoldStore(redis, keys)
    key, team = Scope("key:k", 1_000, 0), Scope("team:t", 500, 100)
    assert await store.reserve("u1", [key, team], 300, MONTH, later()) is None
    # The team has 100 spent + 300 held: 200 more does not fit; the key is not held either.
    refused = await store.reserve("u2", [key, team], 200, MONTH, later())
    assert refused == Refused(team, 100, 300)
    assert await redis.hkeys(keys.holds("key:k")) == [b"u1"]
    assert await store.reserve("u3", [key], 700, MONTH, later()) is None
    assert await store.reserve("u4", [key], 1, MONTH, later()) == Refused(key, 0, 1_000)


async def test_an_expired_hold_no_longer_counts(redis: aioredis.Redis, keys: RedisKeys) -> None:
    store = HoldStore(redis, keys)
    key = Scope("key:k", 1_000, 0)
    assert await store.reserve("dead", [key], 1_000, MONTH, time.time() - 1) is None
    assert await store.reserve("next", [key], 1_000, MONTH, later()) is None
    assert await redis.hkeys(keys.holds("key:k")) == [b"next"]


async def test_the_row_replaces_the_hold_and_counts_once(
    redis: aioredis.Redis, keys: RedisKeys
) -> None:
    store, counter = HoldStore(redis, keys), SpendCounter(redis, keys)
    key, team = Scope("key:k", 1_000, 0), Scope("team:t", 1_000, 0)
    assert await store.reserve("u1", [key, team], 900, MONTH, later()) is None
    row = ("u1", "k", 400, time.time(), None)
    await counter.count([row])
    await counter.count([row])  # a redelivery: counted once
    for scope in ("key:k", "team:t"):
        assert await redis.hlen(keys.holds(scope)) == 0
        assert await redis.get(keys.spend(scope, MONTH)) == b"400"
    assert not await redis.exists(keys.hold_scopes("u1"))
    # 400 spent: 600 fits, 601 does not; and a larger reported spend wins over the counter.
    assert await store.reserve("u2", [key], 601, MONTH, later()) == Refused(key, 400, 0)
    assert await store.reserve("u2", [Scope("key:k", 1_000, 500)], 500, MONTH, later()) is None


async def test_a_finished_request_keeps_its_hold_a_short_while(
    redis: aioredis.Redis, keys: RedisKeys
) -> None:
    store = HoldStore(redis, keys)
    assert await store.reserve("u1", [Scope("key:k", 10, 0)], 5, MONTH, time.time() + 3600) is None
    await store.ended("u1", ["key:k"])
    expiry = await redis.zscore(keys.hold_expiries("key:k"), "u1")
    assert expiry is not None and expiry < time.time() + 31


async def test_a_request_refused_before_any_model_ran_frees_its_hold_at_once(
    redis: aioredis.Redis, keys: RedisKeys
) -> None:
    store = HoldStore(redis, keys)
    assert await store.reserve("u1", [Scope("key:k", 10, 0)], 10, MONTH, later()) is None
    await store.ended("u1", ["key:k"], free=True)
    assert await redis.hlen(keys.holds("key:k")) == 0
    assert not await redis.exists(keys.hold_scopes("u1"))
    assert await store.reserve("u2", [Scope("key:k", 10, 0)], 10, MONTH, later()) is None


async def test_rows_a_failure_could_not_count_are_counted_with_the_next(
    keys: RedisKeys, tmp_path: Path
) -> None:
    port = free_port()
    client = kv.connect(f"redis://127.0.0.1:{port}", timeout=0.5)
    counter = SpendCounter(client, keys)
    await counter.count([("u1", "k", 7, time.time(), None)])  # nothing listens: kept
    _, server = start_redis(tmp_path, port)  # Redis is back
    try:
        await counter.count([("u2", "k", 5, time.time(), None)])
        assert await client.get(keys.spend("key:k", MONTH)) == b"12"
    finally:
        await client.aclose()
        server.terminate()
        server.wait(timeout=10)


async def test_rows_a_failure_could_not_count_are_retried_without_a_next_row(
    keys: RedisKeys, tmp_path: Path
) -> None:
    """After an outage at the end of a burst no next row comes: billing's retry (every second)
    counts the waiting rows, and drops the holds they replace."""
    port = free_port()
    client = kv.connect(f"redis://127.0.0.1:{port}", timeout=0.5)
    counter = SpendCounter(client, keys)
    await counter.retry()  # nothing waits: no call, no error
    await counter.count([("u1", "k", 7, time.time(), None)])  # nothing listens: kept
    _, server = start_redis(tmp_path, port)  # Redis is back
    try:
        store = HoldStore(client, keys)
        await client.hset(keys.holds("key:k"), "u1", 7)  # as the edge held it
        await counter.retry()
        assert await client.get(keys.spend("key:k", MONTH)) == b"7"
        assert await client.hlen(keys.holds("key:k")) == 0
        await counter.retry()  # nothing waits any more: counted once
        assert await client.get(keys.spend("key:k", MONTH)) == b"7"
        assert await store.reserve("u2", [Scope("key:k", 10, 0)], 3, MONTH, later()) is None
    finally:
        await client.aclose()
        server.terminate()
        server.wait(timeout=10)


async def test_a_voided_hold_is_dropped_and_never_made_later(
    redis: aioredis.Redis, keys: RedisKeys
) -> None:
    """The edge gave up waiting on a hold (Redis frozen) and answered without one: its VOID drops
    the hold if Redis made it, and, if the RESERVE is still queued (run after the VOID once Redis
    thaws), that RESERVE holds nothing (docs/billing.md, "Enforcement")."""
    store = HoldStore(redis, keys)
    key = Scope("key:k", 1_000, 0)
    assert await store.reserve("made", [key], 600, MONTH, later()) is None
    await store.void("made", ["key:k"], 60)
    await store.void("queued", ["key:k"], 60)
    with pytest.raises(RuntimeError, match="voided"):
        await store.reserve("queued", [key], 600, MONTH, later())
    assert await redis.hlen(keys.holds("key:k")) == 0
    assert not await redis.exists(keys.hold_scopes("made"), keys.hold_scopes("queued"))
    assert 0 < await redis.ttl(keys.hold_void("queued")) <= 61
    assert await store.reserve("next", [key], 1_000, MONTH, later()) is None  # all of it again


async def test_a_row_admitted_without_a_hold_still_counts_on_its_team(
    redis: aioredis.Redis, keys: RedisKeys
) -> None:
    """Fail open (the hold's call got no answer and was voided) leaves no list of scopes: the
    row's own team still counts it, once."""
    store, counter = HoldStore(redis, keys), SpendCounter(redis, keys)
    await store.void("u1", ["key:k", "team:t"], 60)
    row = ("u1", "k", 500, time.time(), "t")
    await counter.count([row])
    await counter.count([row])
    for scope in ("key:k", "team:t"):
        assert await redis.get(keys.spend(scope, MONTH)) == b"500"


async def test_a_row_taken_back_before_it_was_counted_is_never_counted(
    redis: aioredis.Redis, keys: RedisKeys
) -> None:
    """Settled undelivered while its count still waited (a Redis failure, another replica): the
    count that comes later only drops its hold (docs/billing.md)."""
    store, counter = HoldStore(redis, keys), SpendCounter(redis, keys)
    assert await store.reserve("u2", [Scope("key:k", 1_000, 0)], 900, MONTH, later()) is None
    row = ("u2", "k", 700, time.time(), None)
    await counter.uncount([row])
    await counter.count([row])
    assert await redis.get(keys.spend("key:k", MONTH)) is None
    assert await redis.hlen(keys.holds("key:k")) == 0
