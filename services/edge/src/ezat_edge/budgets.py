"""Monthly spend limits per key (``api_keys.monthly_budget_micros``), checked before a request
is published, so a key over its budget never reaches a deployment.

The month's spend is the ``totals.cost_micros`` of billing's usage query for the key since the
first of the month (UTC), cached per key for ``ttl`` seconds. Requests in flight while a key
crosses its budget still complete (the limit is checked at admission, not mid-stream), so a key
can overshoot by what its concurrent requests and the cache age allow. When billing cannot
answer, the last known spend is used; with none, the request is admitted (fail open).
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
from collections.abc import Callable

import msgspec
from ezat_common import envelopes
from ezat_common.db import ApiKey
from ezat_common.errors import GatewayError
from ezat_common.subjects import Subjects
from nats.aio.client import Client

log = logging.getLogger("ezat.edge.budgets")

TTL = 2.0
QUERY_TIMEOUT = 1.0


class _Totals(msgspec.Struct):
    cost_micros: int = 0


class _Page(msgspec.Struct):
    totals: _Totals


_decode_page = msgspec.json.Decoder(_Page).decode


def month_bounds(now: float) -> tuple[datetime.datetime, datetime.datetime]:
    """The first instant of the current UTC month and of the next one."""
    at = datetime.datetime.fromtimestamp(now, datetime.UTC)
    start = at.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    if start.month == 12:
        return start, start.replace(year=start.year + 1, month=1)
    return start, start.replace(month=start.month + 1)


def over_budget(key: ApiKey, spent_micros: int, now: float) -> GatewayError | None:
    """The 403 for a key whose month's spend reached its budget, or None."""
    budget = key.monthly_budget_micros
    if budget is None or spent_micros < budget:
        return None
    _, resets = month_bounds(now)
    return GatewayError(
        403,
        f"this key has used its monthly budget of ${budget / 1_000_000:,.2f} "
        f"(spent ${spent_micros / 1_000_000:,.2f}); it resets on {resets:%Y-%m-%d} 00:00 UTC, "
        "or an operator can raise it",
        type="permission_error",
    )


class Budgets:
    def __init__(
        self, subjects: Subjects, ttl: float = TTL, clock: Callable[[], float] = time.time
    ) -> None:
        self._subjects = subjects
        self._ttl = ttl
        self._clock = clock
        # key id -> (month start epoch, spent micros, fetched at monotonic)
        self._cache: dict[str, tuple[float, int, float]] = {}
        self._inflight: dict[str, asyncio.Future[int | None]] = {}

    async def check(self, nc: Client, key: ApiKey) -> None:
        """Raise the 403 if ``key`` has a budget and has used it this month."""
        if key.monthly_budget_micros is None:
            return
        now = self._clock()
        spent = await self.spent(nc, key.id, now)
        error = over_budget(key, spent, now)
        if error is not None:
            raise error

    async def spent(self, nc: Client, key_id: str, now: float) -> int:
        start = month_bounds(now)[0].timestamp()
        hit = self._cache.get(key_id)
        fresh = hit is not None and hit[0] == start and time.monotonic() - hit[2] < self._ttl
        if hit is not None and fresh:
            return hit[1]
        pending = self._inflight.get(key_id)
        if pending is None:  # one query per key at a time; concurrent requests share it
            pending = asyncio.ensure_future(self._query(nc, key_id, start))
            self._inflight[key_id] = pending
            pending.add_done_callback(lambda _: self._inflight.pop(key_id, None))
        value = await asyncio.shield(pending)
        if value is None:  # billing did not answer: the last known spend of this month, or 0
            return hit[1] if hit is not None and hit[0] == start else 0
        self._cache[key_id] = (start, value, time.monotonic())
        return value

    async def _query(self, nc: Client, key_id: str, start: float) -> int | None:
        query = envelopes.UsageQuery(key_id=key_id, since=start, limit=1)
        try:
            msg = await nc.request(
                self._subjects.usage_query, envelopes.encode(query), timeout=QUERY_TIMEOUT
            )
            return _decode_page(msg.data).totals.cost_micros
        except Exception as exc:  # any failure: fail open, loudly
            log.warning("monthly spend of %s unavailable: %r", key_id, exc)
            return None
