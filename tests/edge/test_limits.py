"""limits.py against a real Redis: the RPM and TPM minute windows, the 429 they answer (its
headers and message), and requests let through when Redis is unreachable (fail-open)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator

import msgspec
import pytest
import pytest_asyncio
from ezat_cli.infra import free_port
from ezat_common import errors, kv, token_window
from ezat_common.db import ApiKey
from ezat_common.errors import GatewayError
from ezat_common.redis_keys import RedisKeys
from ezat_edge import limits
from ezat_edge.limits import RateLimiter
from redis import asyncio as aioredis

# 15 s into a minute window: it resets in 45 s.
MINUTE = 28_333_334
NOW = MINUTE * 60 + 15.0


class Clock:
    """Stands in for the ``time`` module limits.py reads its windows from."""

    def __init__(self, now: float) -> None:
        self.now = now

    def time(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock(NOW)
    monkeypatch.setattr(token_window, "time", fake)  # the window rule's clock
    return fake


@pytest_asyncio.fixture
async def redis(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = kv.connect(redis_url, timeout=limits.REDIS_TIMEOUT)
    try:
        yield client
    finally:
        await client.aclose()


@pytest.fixture
def keys() -> RedisKeys:
    """A prefix of this test alone: tests sharing the Redis never count each other's requests."""
    return RedisKeys(prefix=f"ezat-test-{uuid.uuid4().hex[:12]}")


@pytest.fixture
def limiter(redis: aioredis.Redis, keys: RedisKeys, clock: Clock) -> RateLimiter:
    """A limiter on the session's Redis, its windows read from ``clock``."""
    return RateLimiter(redis, keys)


def api_key(rpm: int | None = None, tpm: int | None = None) -> ApiKey:
    return ApiKey(id=f"key_{uuid.uuid4().hex[:12]}", name="t", prefix="sk-t", rpm=rpm, tpm=tpm)


async def value(redis: aioredis.Redis, name: str) -> int:
    raw = await redis.get(name)
    return int(raw) if raw is not None else 0


async def test_rpm_counts_each_request_and_refuses_past_the_limit(
    limiter: RateLimiter, redis: aioredis.Redis, keys: RedisKeys
) -> None:
    key = api_key(rpm=2)
    assert await limiter.check(key) == {
        "x-ratelimit-limit-requests": "2",
        "x-ratelimit-remaining-requests": "1",
        "x-ratelimit-reset-requests": "45s",
    }
    assert (await limiter.check(key))["x-ratelimit-remaining-requests"] == "0"
    with pytest.raises(GatewayError) as caught:
        await limiter.check(key)
    err = caught.value
    assert (err.status, err.type) == (429, "rate_limit_error")
    assert (
        err.message == "rate limit: this key allows 2 requests per minute; retry after 45 seconds"
    )
    assert err.retry_after == 45
    assert err.headers == {
        "x-ratelimit-limit-requests": "2",
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "45s",
    }
    # A refused request still counts, as every call does.
    name = keys.requests(key.id, MINUTE)
    assert await value(redis, name) == 3
    assert 0 < await redis.ttl(name) <= limits.WINDOW_SECONDS + 1


async def test_rpm_window_is_one_minute_per_key(
    limiter: RateLimiter, redis: aioredis.Redis, keys: RedisKeys, clock: Clock
) -> None:
    key, other = api_key(rpm=1), api_key(rpm=1)
    await limiter.check(key)
    with pytest.raises(GatewayError):
        await limiter.check(key)
    # Another key has a window of its own.
    assert (await limiter.check(other))["x-ratelimit-remaining-requests"] == "0"
    # The next minute starts a new window; its reset is counted from the new minute.
    clock.now = (MINUTE + 1) * 60 + 50.0
    headers = await limiter.check(key)
    assert headers["x-ratelimit-remaining-requests"] == "0"
    assert headers["x-ratelimit-reset-requests"] == "10s"
    assert await value(redis, keys.requests(key.id, MINUTE + 1)) == 1


async def test_tpm_counts_estimated_tokens_and_gives_a_refused_estimate_back(
    limiter: RateLimiter, redis: aioredis.Redis, keys: RedisKeys
) -> None:
    key = api_key(tpm=100)
    # 1 token per 4 bytes of body: 200 bytes count as 50.
    assert await limiter.check_tokens(key, 200) == {
        "x-ratelimit-limit-tokens": "100",
        "x-ratelimit-remaining-tokens": "50",
        "x-ratelimit-reset-tokens": "45s",
    }
    assert (await limiter.check_tokens(key, 200))["x-ratelimit-remaining-tokens"] == "0"
    rpm_headers = {"x-ratelimit-remaining-requests": "7"}
    with pytest.raises(GatewayError) as caught:
        await limiter.check_tokens(key, 3, rpm_headers)  # the smallest estimate: one token
    err = caught.value
    assert (err.status, err.type, err.retry_after) == (429, "rate_limit_error", 45)
    assert err.message == (
        "rate limit: this key allows 100 input tokens per minute and this request counts as "
        "about 1 (1 token per 4 bytes of body); retry after 45 seconds"
    )
    # The 429 carries the request headers it was given as well as its own.
    assert err.headers == {
        "x-ratelimit-remaining-requests": "7",
        "x-ratelimit-limit-tokens": "100",
        "x-ratelimit-remaining-tokens": "0",
        "x-ratelimit-reset-tokens": "45s",
    }
    # The refused request's token was given back: the window holds what was let through.
    assert await value(redis, keys.tokens(key.id, MINUTE)) == 100


async def test_a_request_larger_than_the_tpm_leaves_the_window_as_it_was(
    limiter: RateLimiter, redis: aioredis.Redis, keys: RedisKeys
) -> None:
    key = api_key(tpm=100)
    with pytest.raises(GatewayError) as caught:
        await limiter.check_tokens(key, 500)  # 125 tokens
    assert "counts as about 125 " in caught.value.message
    assert caught.value.headers["x-ratelimit-remaining-tokens"] == "100"
    assert await value(redis, keys.tokens(key.id, MINUTE)) == 0
    assert (await limiter.check_tokens(key, 200))["x-ratelimit-remaining-tokens"] == "50"


async def test_the_429_renders_its_retry_after_and_window_headers(limiter: RateLimiter) -> None:
    key = api_key(rpm=0)
    with pytest.raises(GatewayError) as caught:
        await limiter.check(key)
    status, headers, body = errors.ANTHROPIC.response(caught.value.reply, "req_1")
    assert status == 429
    assert headers["retry-after"] == "45"
    assert headers["x-ratelimit-limit-requests"] == "0"
    assert msgspec.json.decode(body) == {
        "type": "error",
        "error": {
            "type": "rate_limit_error",
            "message": "rate limit: this key allows 0 requests per minute; retry after 45 seconds",
        },
        "request_id": "req_1",
    }


async def test_a_key_without_limits_is_not_counted(
    limiter: RateLimiter, redis: aioredis.Redis, keys: RedisKeys
) -> None:
    key = api_key()
    assert await limiter.check(key) == {}
    assert await limiter.check_tokens(key, 10_000) == {}
    assert await redis.exists(keys.requests(key.id, MINUTE), keys.tokens(key.id, MINUTE)) == 0


async def test_unreachable_redis_lets_requests_through_and_says_so(
    keys: RedisKeys, caplog: pytest.LogCaptureFixture
) -> None:
    dead = kv.connect(f"redis://127.0.0.1:{free_port()}", timeout=limits.REDIS_TIMEOUT)
    limiter = RateLimiter(dead, keys)
    key = api_key(rpm=1, tpm=1)
    try:
        with caplog.at_level(logging.WARNING, logger="ezat.edge.limits"):
            for _ in range(3):  # over both limits, had they been counted
                assert await limiter.check(key) == {}
                assert await limiter.check_tokens(key, 4_000) == {}
    finally:
        await limiter.close()
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 6
    assert all(m.startswith("rate limiter unavailable, allowing request: ") for m in messages)


async def test_without_redis_every_request_is_let_through(keys: RedisKeys) -> None:
    limiter = RateLimiter(None, keys)
    key = api_key(rpm=1, tpm=1)
    for _ in range(3):
        assert await limiter.check(key) == {}
        assert await limiter.check_tokens(key, 4_000) == {}
    await limiter.close()  # nothing to close


def team_key(team: str, **limits: int | None) -> ApiKey:
    return ApiKey(
        id=f"key_{uuid.uuid4().hex[:12]}",
        name="t",
        prefix="sk-t",
        team_id=team,
        team_name="search",
        **limits,  # type: ignore[arg-type]
    )


async def test_a_teams_rpm_is_shared_and_the_binding_window_is_reported(
    limiter: RateLimiter, redis: aioredis.Redis, keys: RedisKeys
) -> None:
    team = f"team_{uuid.uuid4().hex[:8]}"
    roomy, tight = team_key(team, rpm=10, team_rpm=3), team_key(team, rpm=1, team_rpm=3)
    # The team's window binds the roomy key (2 left of 3 before 9 of 10) ...
    assert (await limiter.check(roomy))["x-ratelimit-limit-requests"] == "3"
    # ... the key's own the tight one (0 left of 1 before 1 of 3).
    assert (await limiter.check(tight))["x-ratelimit-limit-requests"] == "1"
    # The tight key's own window refuses: its team's is not counted.
    with pytest.raises(GatewayError) as caught:
        await limiter.check(tight)
    assert caught.value.message.startswith("rate limit: this key allows 1 requests per minute")
    assert await value(redis, keys.team_requests(team, MINUTE)) == 2
    await limiter.check(roomy)
    with pytest.raises(GatewayError) as caught:
        await limiter.check(roomy)
    err = caught.value
    assert err.message == (
        "rate limit: this key's team `search` allows 3 requests per minute; retry after 45 seconds"
    )
    assert err.headers["x-ratelimit-limit-requests"] == "3"
    assert err.headers["x-ratelimit-remaining-requests"] == "0"


async def test_a_teams_tpm_refusal_gives_the_keys_count_back(
    limiter: RateLimiter, redis: aioredis.Redis, keys: RedisKeys
) -> None:
    team = f"team_{uuid.uuid4().hex[:8]}"
    key = team_key(team, tpm=1000, team_tpm=60)
    assert (await limiter.check_tokens(key, 200))["x-ratelimit-limit-tokens"] == "60"  # 50 tokens
    with pytest.raises(GatewayError) as caught:
        await limiter.check_tokens(key, 200)
    assert caught.value.message.startswith("rate limit: this key's team `search` allows 60 input")
    assert await value(redis, keys.tokens(key.id, MINUTE)) == 50
    assert await value(redis, keys.team_tokens(team, MINUTE)) == 50
    # A key of no team, or a team without limits, counts in its own windows only.
    alone = api_key(tpm=100)
    assert (await limiter.check_tokens(alone, 40))["x-ratelimit-remaining-tokens"] == "90"
