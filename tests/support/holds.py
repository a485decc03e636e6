"""Budget holds as Redis keeps them (docs/billing.md, "Budget holds"; ezat_common/redis_keys.py):
what the tests of holds read, for any stack's subject prefix."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from ezat_common.spend_counter import month_of
from redis import asyncio as aioredis


def month() -> str:
    """The UTC month a spend counts in now (``YYYYMM``, billing's own rule)."""
    return month_of(time.time())


@dataclass(frozen=True)
class Holds:
    """One budget scope's holds: ``stored`` in its hash, ``expiring`` in its sorted set,
    ``live`` (not past their expiry, so still counted at admission) and the month's spend
    counter."""

    stored: int
    expiring: int
    live: int
    spent: int


async def holds_of(redis: aioredis.Redis, prefix: str, scope: str) -> Holds:
    async with redis.pipeline(transaction=True) as pipe:
        pipe.hlen(f"{prefix}:hold:{scope}")
        pipe.zcard(f"{prefix}:holdexp:{scope}")
        pipe.zcount(f"{prefix}:holdexp:{scope}", f"({time.time()}", "+inf")
        pipe.get(f"{prefix}:spend:{scope}:{month()}")
        stored, expiring, live, spent = await pipe.execute()
    return Holds(int(stored), int(expiring), int(live), int(spent or 0))


async def until_no_holds(
    redis: aioredis.Redis, prefix: str, scope: str, seconds: float, every: float = 0.25
) -> Holds:
    """``scope``'s holds once none is stored or expiring, or as they are after ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        holds = await holds_of(redis, prefix, scope)
        if holds.stored == holds.expiring == 0 or time.monotonic() >= deadline:
            return holds
        await asyncio.sleep(every)


async def no_holds_left(redis_url: str, prefix: str, scopes: list[str]) -> dict[str, int]:
    """Asserts Redis holds nothing for ``scopes`` (nor any request's list of scopes); their
    spend counters."""
    redis = aioredis.from_url(redis_url)
    try:
        counted = {}
        for scope in scopes:
            holds = await holds_of(redis, prefix, scope)
            assert (holds.stored, holds.expiring) == (0, 0), (scope, holds)
            counted[scope] = holds.spent
        assert not [k async for k in redis.scan_iter(f"{prefix}:holdof:*")]
        return counted
    finally:
        await redis.aclose()


async def holds_left(redis_url: str, prefix: str, scope: str) -> dict[str, int]:
    """The holds still stored on ``scope``, and (under ``holdof``) how many uids' scope lists
    are still there."""
    redis = aioredis.from_url(redis_url)
    try:
        stored = (await holds_of(redis, prefix, scope)).stored
        listed = len([k async for k in redis.scan_iter(f"{prefix}:holdof:*")])
        return {scope: stored, "holdof": listed}
    finally:
        await redis.aclose()
