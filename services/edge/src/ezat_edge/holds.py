"""The budget hold store in Redis (docs/billing.md, "Budget holds"; keys: redis_keys.py).

One Lua script, one round trip at admission: for every scope of the request (``key:<id>``,
``team:<id>``) it drops the holds past their expiry, then admits the request only if its worst
case fits in ``budget - month's spend - holds`` of every scope, and if so holds it on each, under
the request's uid, until the request's deadline (so a holder that dies never leaks a hold). The
month's spend is the larger of billing's counter (``ezat_common/spend_counter.py``) and the spend
billing's usage query last reported (passed in). When the request ends, its hold is kept for
``SETTLE_GRACE`` seconds more at most: billing replaces it with the row under the same uid
(counting the row, dropping the hold) as soon as the row is stored; a request that leaves no row
frees its hold then.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from ezat_common import kv
from ezat_common.redis_keys import RedisKeys
from msgspec import Struct
from redis import asyncio as aioredis

# Each admission waits on Redis at most this long (for a free connection, then the answer), on
# at most HOLD_CONNECTIONS connections per edge.
REDIS_TIMEOUT = 2.0
HOLD_CONNECTIONS = 64
# Seconds a finished request's hold may wait for billing to store its row (and replace it).
SETTLE_GRACE = 30.0
# Seconds a scope's hash and sorted set of holds outlive their latest hold.
_IDLE = 86400

# KEYS: per scope (holds, expiries, spend counter), the uid's scope list, the uid's void marker.
# ARGV: uid, amount, now, expiry, scope count, then per scope (budget, reported spend), scopes.
# A voided uid (VOID ran first: this call had been given up on) holds nothing.
RESERVE = """
local uid, amount, now = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local expiry, n = tonumber(ARGV[4]), tonumber(ARGV[5])
if redis.call('EXISTS', KEYS[3 * n + 2]) == 1 then return {-1, '0', '0'} end
for i = 1, n do
  local h, e, s = KEYS[3 * i - 2], KEYS[3 * i - 1], KEYS[3 * i]
  local dead = redis.call('ZRANGEBYSCORE', e, '-inf', now)
  for _, u in ipairs(dead) do redis.call('HDEL', h, u) end
  if #dead > 0 then redis.call('ZREMRANGEBYSCORE', e, '-inf', now) end
  local held = 0
  for _, v in ipairs(redis.call('HVALS', h)) do held = held + tonumber(v) end
  held = held - tonumber(redis.call('HGET', h, uid) or '0')
  local spent = math.max(tonumber(redis.call('GET', s) or '0'), tonumber(ARGV[5 + 2 * i]))
  if spent + held + amount > tonumber(ARGV[4 + 2 * i]) then
    return {i, string.format('%.0f', spent), string.format('%.0f', held)}
  end
end
for i = 1, n do
  local h, e = KEYS[3 * i - 2], KEYS[3 * i - 1]
  redis.call('HSET', h, uid, amount)
  redis.call('ZADD', e, expiry, uid)
  redis.call('EXPIRE', h, ARGV[7 + 2 * n])
  redis.call('EXPIRE', e, ARGV[7 + 2 * n])
end
redis.call('SET', KEYS[3 * n + 1], ARGV[6 + 2 * n], 'EX', ARGV[7 + 2 * n])
return {0, '0', '0'}
"""

# KEYS: per scope the holds and the expiries, then the uid's scope list. ARGV: uid, the latest
# the hold may now last, "1" to drop it now (its request can cost nothing).
SHORTEN = """
local n = (#KEYS - 1) / 2
for i = 1, n do
  local h, e = KEYS[2 * i - 1], KEYS[2 * i]
  if ARGV[3] == '1' then
    redis.call('HDEL', h, ARGV[1])
    redis.call('ZREM', e, ARGV[1])
  else
    local at = redis.call('ZSCORE', e, ARGV[1])
    if at and tonumber(at) > tonumber(ARGV[2]) then redis.call('ZADD', e, ARGV[2], ARGV[1]) end
  end
end
if ARGV[3] == '1' then redis.call('DEL', KEYS[#KEYS]) end
return 0
"""


# KEYS: per scope the holds and the expiries, then the new uid's scope list. ARGV: the first
# uid, the new one, the scopes, the list's lifetime. Moves a hold still there as it was.
MOVE = """
local n = (#KEYS - 1) / 2
for i = 1, n do
  local h, e = KEYS[2 * i - 1], KEYS[2 * i]
  local amount, at = redis.call('HGET', h, ARGV[1]), redis.call('ZSCORE', e, ARGV[1])
  if amount and at then
    redis.call('HDEL', h, ARGV[1])
    redis.call('ZREM', e, ARGV[1])
    redis.call('HSET', h, ARGV[2], amount)
    redis.call('ZADD', e, at, ARGV[2])
  end
end
redis.call('SET', KEYS[#KEYS], ARGV[3], 'EX', ARGV[4])
return 0
"""


# KEYS: per scope the holds and the expiries, the uid's scope list, its void marker. ARGV: uid,
# the marker's lifetime. Drops whatever hold the uid has and marks it void, so that a RESERVE of
# it that Redis runs later (sent before the edge gave up waiting) holds nothing either.
VOID = """
local n = (#KEYS - 2) / 2
for i = 1, n do
  redis.call('HDEL', KEYS[2 * i - 1], ARGV[1])
  redis.call('ZREM', KEYS[2 * i], ARGV[1])
end
redis.call('DEL', KEYS[#KEYS - 1])
redis.call('SET', KEYS[#KEYS], '1', 'EX', ARGV[2])
return 0
"""


class Scope(Struct, frozen=True):
    """One budget a request counts against: its name, limit and billing's reported spend."""

    name: str
    budget: int
    reported: int


class Refused(Struct, frozen=True):
    """The scope a hold did not fit in, with its month's spend and what others hold on it."""

    scope: Scope
    spent: int
    held: int


class HoldStore:
    @classmethod
    def from_env(cls, keys: RedisKeys) -> HoldStore | None:
        redis = kv.pooled_budget_store(timeout=REDIS_TIMEOUT, connections=HOLD_CONNECTIONS)
        return None if redis is None else cls(redis, keys)

    def __init__(self, redis: aioredis.Redis, keys: RedisKeys) -> None:
        self._keys = keys
        self._redis = redis
        self._reserve = redis.register_script(RESERVE)
        self._shorten = redis.register_script(SHORTEN)
        self._move = redis.register_script(MOVE)
        self._void = redis.register_script(VOID)

    async def reserve(
        self, uid: str, scopes: Sequence[Scope], amount: int, month: str, expiry: float
    ) -> Refused | None:
        """Hold ``amount`` on every scope until ``expiry`` (epoch seconds), or none of them and
        the first scope it does not fit in. Raises when Redis does not answer."""
        keys: list[str] = []
        args: list[str | int | float] = [uid, amount, time.time(), expiry, len(scopes)]
        for scope in scopes:
            keys += [
                self._keys.holds(scope.name),
                self._keys.hold_expiries(scope.name),
                self._keys.spend(scope.name, month),
            ]
            args += [scope.budget, scope.reported]
        keys += [self._keys.hold_scopes(uid), self._keys.hold_void(uid)]
        args += [" ".join(s.name for s in scopes), int(max(expiry - time.time(), 0)) + _IDLE]
        index, spent, held = await self._reserve(keys=keys, args=args)
        if int(index) == 0:
            return None
        if int(index) < 0:  # a uid is new at admission: only a retry of a given-up call is void
            raise RuntimeError(f"budget hold of {uid} was voided")
        return Refused(scopes[int(index) - 1], int(spent), int(held))

    async def moved(self, uid: str, new_uid: str, scopes: Sequence[str], expiry: float) -> None:
        """The request of ``uid`` is published again under ``new_uid`` (its first holder died):
        its hold goes with it, so that the row of the new uid replaces it and is counted on
        every scope (``expiry``: the hold's deadline, for the new uid's scope list)."""
        keys: list[str] = []
        for name in scopes:
            keys += [self._keys.holds(name), self._keys.hold_expiries(name)]
        keys.append(self._keys.hold_scopes(new_uid))
        ttl = int(max(expiry - time.time(), 0)) + _IDLE
        await self._move(keys=keys, args=[uid, new_uid, " ".join(scopes), ttl])

    async def void(self, uid: str, scopes: Sequence[str], lifetime: float) -> None:
        """``uid``'s hold had no answer in time and its request went on without one (refused
        503, or admitted fail-open): drop any hold Redis made of it and keep any later one from
        being made, for ``lifetime`` seconds (the hold's own at most)."""
        await self.void_all([(uid, list(scopes), lifetime)])

    async def void_all(self, holds: Sequence[tuple[str, list[str], float]]) -> None:
        """``void`` of each ``(uid, scopes, lifetime)``, in one pipeline: one round trip."""
        async with self._redis.pipeline(transaction=False) as pipe:
            for uid, scopes, lifetime in holds:
                keys: list[str] = []
                for name in scopes:
                    keys += [self._keys.holds(name), self._keys.hold_expiries(name)]
                keys += [self._keys.hold_scopes(uid), self._keys.hold_void(uid)]
                await self._void(keys=keys, args=[uid, int(lifetime) + 1], client=pipe)
            await pipe.execute()

    async def ended(self, uid: str, scopes: Sequence[str], free: bool = False) -> None:
        """The request ended: its hold lasts ``SETTLE_GRACE`` more seconds at most, or, ``free``
        (it was refused before any model ran: nothing to charge), is dropped now."""
        keys: list[str] = []
        for name in scopes:
            keys += [self._keys.holds(name), self._keys.hold_expiries(name)]
        keys.append(self._keys.hold_scopes(uid))
        args: list[str | float] = [uid, time.time() + SETTLE_GRACE, "1" if free else "0"]
        await self._shorten(keys=keys, args=args)
