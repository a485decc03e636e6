"""Redis keys (ezat_common.redis_keys) and the one client policy (ezat_common.kv)."""

from __future__ import annotations

import pytest
from ezat_common import kv
from ezat_common.redis_keys import RedisKeys, from_env


def every_key(keys: RedisKeys) -> list[str]:
    return [
        keys.requests("k1", 7),
        keys.tokens("k1", 7),
        keys.thinking("k1", "call_1"),
        keys.binding("eu", "m", "d1"),
        keys.health("dep"),
        keys.probe("dep"),
        keys.holds("key:k1"),
        keys.hold_expiries("team:t1"),
        keys.hold_scopes("u1"),
        keys.spend("key:k1", "202612"),
    ]


def test_layout() -> None:
    assert every_key(RedisKeys("ezat")) == [
        "ezat:rl:k1:7",
        "ezat:tpm:k1:7",
        "ezat:thinking:k1:call_1",
        "ezat:aff:eu:m:d1",
        "ezat:health:dep",
        "ezat:probe:dep",
        "ezat:hold:key:k1",
        "ezat:holdexp:team:t1",
        "ezat:holdof:u1",
        "ezat:spend:key:k1:202612",
    ]


def test_two_gateways_sharing_a_redis_do_not_collide() -> None:
    one, two = every_key(RedisKeys("ezat")), every_key(RedisKeys("tenant2"))
    assert len(set(one) | set(two)) == len(one) + len(two)
    assert all(k.startswith("tenant2:") for k in two)


def test_the_namespace_is_the_subject_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EZAT_SUBJECT_PREFIX", "stack7")
    assert from_env().health("d") == "stack7:health:d"
    monkeypatch.delenv("EZAT_SUBJECT_PREFIX")
    assert from_env().prefix == "ezat"


@pytest.mark.parametrize(("asked", "bound"), [(0.5, 0.5), (0.25, 0.25), (0.0, 0.01)])
async def test_every_call_is_bounded_and_never_retried(asked: float, bound: float) -> None:
    client = kv.connect("redis://127.0.0.1:1", timeout=asked)
    try:
        conn = client.connection_pool.make_connection()
        assert (conn.socket_timeout, conn.socket_connect_timeout) == (bound, bound)
        retry = client.get_retry()
        assert retry is not None and retry.get_retries() == 0
    finally:
        await client.aclose()


async def test_no_redis_url_is_no_client(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REDIS_URL", raising=False)
    assert kv.from_env(timeout=0.5) is None
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")
    client = kv.from_env(timeout=0.5)
    assert client is not None
    await client.aclose()


async def test_a_pooled_client_waits_for_a_connection_within_its_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("EZAT_BUDGET_REDIS_URL", raising=False)
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1")
    client = kv.pooled_budget_store(timeout=0.3, connections=7)
    assert client is not None
    try:
        pool = client.connection_pool
        assert (pool.max_connections, pool.timeout) == (7, 0.3)
        conn = pool.make_connection()
        assert (conn.socket_timeout, conn.socket_connect_timeout) == (0.3, 0.3)
    finally:
        await client.aclose()
    monkeypatch.setenv("REDIS_URL", "")
    assert kv.pooled_budget_store(timeout=0.3, connections=7) is None


async def test_budgets_use_their_own_redis_when_one_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    """EZAT_BUDGET_REDIS_URL (one store every region shares: docs/billing.md, "Across regions")
    serves the holds and spend counters; rate limits and the rest keep REDIS_URL."""
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")
    monkeypatch.setenv("EZAT_BUDGET_REDIS_URL", "redis://127.0.0.2:2/3")
    clients = [
        kv.from_env(timeout=0.5),
        kv.from_env(timeout=0.5, budgets=True),
        kv.pooled_budget_store(timeout=0.5, connections=2),
    ]
    try:
        seen = []
        for client in clients:
            assert client is not None
            kwargs = client.connection_pool.connection_kwargs
            seen.append((kwargs["host"], kwargs["port"], kwargs["db"]))
        assert seen == [("127.0.0.1", 1, 0), ("127.0.0.2", 2, 3), ("127.0.0.2", 2, 3)]
    finally:
        for client in clients:
            if client is not None:
                await client.aclose()
