"""The month's spend of each budget scope, counted in Redis by billing as it stores rows
(docs/billing.md, "Budget holds").

The edge admits a request only if its worst case fits in ``budget - month's spend - holds`` of
every scope it belongs to (``key:<id>``, ``team:<id>``); reading the spend from PostgreSQL on
every request would put a database round trip on the request path, so billing keeps a counter per
scope and month in Redis: when it stores a row it runs ``COUNT`` once, which counts the row's cost
at most once per uid (``SET NX`` of a per-uid marker), on the key's scope and on every scope the
request's hold was on (the hold remembers them, so that billing needs no team lookup), and drops
the hold: the hold is replaced by the row under the same uid, atomically.

A row settled ``undelivered`` (its cost voided: the client never got the answer) is taken back
once (``UNCOUNT``) from the scopes it was counted on: the per-uid marker names them, so no team
lookup is needed then either, and a row counted before markers named their scopes (``1``) is left
counted (the counter errs on the budget's side).

Rows a failure could not count are counted again with the next stored rows, and every second
by ``retry`` (up to ``MAX_WAITING``), so that their holds are replaced soon after Redis is back.
A counter lost with Redis is not trusted alone: the edge takes the larger of it and the month's
spend billing's usage query last reported (cached, ``budgets.py``).
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Sequence

from redis import asyncio as aioredis

from .redis_keys import RedisKeys

log = logging.getLogger("ezat.spend_counter")

# uid, key id, cost micros, received_at, the key's team when the request was made (or None).
Row = tuple[str, str, int, float, str | None]
# Rows kept to be counted again after a failure (the oldest dropped beyond).
MAX_WAITING = 10_000
# A counter and a uid's marker outlive their month by enough for any late row of it.
TTL_SECONDS = 70 * 24 * 3600

# ARGV: prefix, uid, cost micros, month, the key's scope, ttl, the row's team scope or "".
# The row's own scopes (its key's, its team's) are counted whatever its hold was: a request
# admitted without one (fail open, its hold voided) still counts on its team.
COUNT = """
local p, uid, cost, month, own, ttl = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local scopes = {own}
local seen = {[own] = true}
if ARGV[7] ~= '' then scopes[2] = ARGV[7]; seen[ARGV[7]] = true end
local listed = redis.call('GET', p .. ':holdof:' .. uid)
if listed then
  for s in string.gmatch(listed, '%S+') do
    if not seen[s] then scopes[#scopes + 1] = s; seen[s] = true end
  end
end
for _, s in ipairs(scopes) do
  redis.call('HDEL', p .. ':hold:' .. s, uid)
  redis.call('ZREM', p .. ':holdexp:' .. s, uid)
end
redis.call('DEL', p .. ':holdof:' .. uid)
if redis.call('SET', p .. ':counted:' .. uid, table.concat(scopes, ' '), 'NX', 'EX', ttl) then
  for _, s in ipairs(scopes) do
    local k = p .. ':spend:' .. s .. ':' .. month
    redis.call('INCRBY', k, cost)
    redis.call('EXPIRE', k, ttl)
  end
  return 1
end
return 0
"""

# ARGV: prefix, uid, cost micros, month, ttl. The marker becomes "-" (taken back), keeping its
# TTL, so that a second settling of the same uid, or a late redelivery of its row, changes
# nothing; a row not counted yet (its count waits for a retry, or runs on another replica) gets
# the "-" marker now, so that its count, when it comes, only drops its hold.
UNCOUNT = """
local p, uid, cost, month, ttl = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local marker = p .. ':counted:' .. uid
local scopes = redis.call('GET', marker)
if not scopes then
  redis.call('SET', marker, '-', 'EX', ttl)
  return 0
end
if scopes == '-' or scopes == '1' then return 0 end
for s in string.gmatch(scopes, '%S+') do
  redis.call('DECRBY', p .. ':spend:' .. s .. ':' .. month, cost)
end
redis.call('SET', marker, '-', 'KEEPTTL')
return 1
"""


def month_of(at: float) -> str:
    """The UTC month (``YYYYMM``) a spend at epoch ``at`` counts in."""
    return datetime.datetime.fromtimestamp(at, datetime.UTC).strftime("%Y%m")


def key_scope(key_id: str) -> str:
    return f"key:{key_id}"


def team_scope(team_id: str) -> str:
    return f"team:{team_id}"


class SpendCounter:
    """Billing's side: count stored rows in their scopes' monthly counters, exactly once each."""

    def __init__(self, redis: aioredis.Redis | None, keys: RedisKeys) -> None:
        self._redis = redis
        self._keys = keys
        self._count = None if redis is None else redis.register_script(COUNT)
        self._uncount = None if redis is None else redis.register_script(UNCOUNT)
        self._waiting: list[Row] = []
        self._voided: list[Row] = []

    async def count(self, rows: Sequence[Row]) -> None:
        """Count rows (``Row``) in one pipeline, with those a
        failure left waiting (up to ``MAX_WAITING``, counted again with the next call: a uid is
        counted once however often it is sent). A failure is logged, never raised: the row is
        stored, and the edge also reads billing's total."""
        if self._count is None:
            return
        # Taken, not read: calls run concurrently (the live path, the drain, the retry), and one
        # that succeeds must not drop what another's failure put back meanwhile.
        batch, self._waiting = [*self._waiting, *rows], []
        if not batch:
            return
        try:
            async with self._redis.pipeline(transaction=False) as pipe:  # type: ignore[union-attr]
                for uid, key_id, cost, at, team_id in batch:
                    args: list[str | int] = [self._keys.prefix, uid, cost, month_of(at)]
                    team = team_scope(team_id) if team_id else ""
                    args += [key_scope(key_id), TTL_SECONDS, team]
                    await self._count(args=args, client=pipe)
                await pipe.execute()
        except Exception as exc:
            self._waiting = [*batch, *self._waiting][-MAX_WAITING:]
            log.warning("could not count %d stored rows in the spend counters: %r", len(batch), exc)

    async def retry(self) -> None:
        """Count and take back what failures left waiting, if anything (billing calls it every
        second: after an outage no next row may come to carry them)."""
        if self._waiting:
            await self.count([])
        if self._voided:
            await self.uncount([])

    async def uncount(self, rows: Sequence[Row]) -> None:
        """Take back rows (``Row``, with the cost they were counted at) settled undelivered
        from the scopes each was counted on, once per uid, with those a failure left waiting
        (up to ``MAX_WAITING``). A failure is logged, never raised: the counter then errs on the
        budget's side, and the edge also reads billing's total, which no longer charges them."""
        if self._uncount is None:
            return
        batch, self._voided = [*self._voided, *rows], []
        if not batch:
            return
        try:
            async with self._redis.pipeline(transaction=False) as pipe:  # type: ignore[union-attr]
                for uid, _key_id, cost, at, _team_id in batch:
                    args: list[str | int] = [self._keys.prefix, uid, cost, month_of(at)]
                    await self._uncount(args=[*args, TTL_SECONDS], client=pipe)
                await pipe.execute()
        except Exception as exc:
            self._voided = [*batch, *self._voided][-MAX_WAITING:]
            log.warning(
                "could not take %d voided rows back from the spend counters: %r", len(batch), exc
            )
