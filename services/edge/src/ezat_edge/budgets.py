"""Monthly spend limits per key (``api_keys.monthly_budget_micros``) and per team
(``teams.monthly_budget_micros``, shared by its keys; docs/tenancy.md), checked before a request
is published, so a key over its budget or its team's never reaches a deployment. The rule itself
(the month, the 403) is core/budget.py's; this module asks billing for the spend and caches it.

Before a request is admitted its worst case (core/hold.py) is held on its key's and its team's
budget in Redis (holds.py), atomically across edges, so that concurrent requests cannot together
overshoot a budget (docs/billing.md, "Budget holds"). When Redis is unreachable, each scope's
``budget_enforcement`` (the key's, the team's; NULL: ``[edge] budget_enforcement``, fail_closed
by default) decides, the stricter winning (core/enforcement.py): one fail_closed scope makes the
request a 503; only if all are fail_open is it admitted on the month's spend alone.

The month's spend is the ``totals.cost_micros`` plus ``totals.pending_cost_micros`` (rows
awaiting their delivery confirmation count, as holds) of billing's usage query for the key (for a
team: every key that belongs to it now) since the first of the month (UTC), cached per key and
per team for ``ttl`` seconds; it is the floor the holds start from, and alone decides when no
Redis is configured or a fail_open request is admitted without one. When billing cannot answer,
the last known spend is used; with none, 0: billing's silence does not refuse a request (the
holds still bound what requests in flight may spend, while Redis answers).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

import msgspec
from ezat_common import bus, envelopes, usage_page
from ezat_common.db import ApiKey, Enforcement
from ezat_common.errors import GatewayError
from ezat_common.spend_counter import key_scope, month_of, team_scope
from ezat_common.subjects import Subjects
from ezat_common.tasks import TaskSet
from ezat_common.undecodable import undecodable

from . import metrics as m
from .core.budget import hold_refused, month_bounds, over_budget, team_over_budget
from .core.enforcement import when_unreachable
from .holds import HoldStore, Scope

log = logging.getLogger("ezat.edge.budgets")

TTL = 2.0
# A hold whose call got no answer is voided in the background: tried every VOID_EVERY seconds,
# VOID_TRIES times at most (a Redis that stays away longer ran none of the calls queued to it,
# or ran them and the holds last until their deadline: safe, only longer).
VOID_EVERY = 1.0
VOID_TRIES = 120
VOID_BATCH = 500
QUERY_TIMEOUT = 1.0
Owner = tuple[str | None, str | None]  # (key id, None) or (None, team id)


def unavailable() -> GatewayError:
    """The 503 of a request with a budget while the hold store is unreachable (fail closed)."""
    return GatewayError(
        503,
        "budget: this key's monthly budget cannot be checked right now (the budget hold store "
        "is unreachable), so the request was not sent; retry shortly",
        type="api_error",
        retry_after=5.0,
    )


class Budgets:
    def __init__(
        self,
        subjects: Subjects,
        ttl: float = TTL,
        clock: Callable[[], float] = time.time,
        holds: HoldStore | None = None,
        enforcement: Enforcement = "fail_closed",
    ) -> None:
        self._subjects = subjects
        self._holds = holds
        self._enforcement = enforcement
        self._ttl = ttl
        self._clock = clock
        # (key id, None) or (None, team id) -> (month start epoch, spent micros, fetched at)
        self._cache: dict[Owner, tuple[float, int, float]] = {}
        self._inflight: dict[Owner, asyncio.Future[int | None]] = {}
        self._background = TaskSet()  # keeps each task referenced until done
        # (uid, scopes, lifetime, since): holds to void, and the one task voiding them.
        self._to_void: list[tuple[str, list[str], float, float]] = []
        self._voider: asyncio.Future[None] | None = None

    @staticmethod
    def limits(key: ApiKey) -> bool:
        """Whether a budget applies to ``key``'s requests (its own or its team's)."""
        return key.monthly_budget_micros is not None or (
            key.team_id is not None and key.team_budget_micros is not None
        )

    async def check(self, nc: bus.Client, key: ApiKey) -> None:
        """Raise the 403 if ``key`` has a budget and has used it this month, or its team has."""
        now = self._clock()
        if key.monthly_budget_micros is not None:
            error = over_budget(key, await self.spent(nc, key.id, now), now)
            if error is not None:
                m.BUDGET_REFUSED.inc()
                raise error
        if key.team_id is not None and key.team_budget_micros is not None:
            spent = await self._spent(nc, (None, key.team_id), now)
            error = team_over_budget(key, spent, now)
            if error is not None:
                m.BUDGET_REFUSED.inc()
                raise error

    async def hold(
        self, nc: bus.Client, key: ApiKey, uid: str, worst: int, expiry: float
    ) -> list[str]:
        """Check ``key``'s budgets (the 403), then hold ``worst`` micro-dollars on each under
        ``uid`` until ``expiry``; the scopes held, for ``ended`` (none without a hold store)."""
        await self.check(nc, key)
        if self._holds is None:
            return []
        now = self._clock()
        scopes = []
        if key.monthly_budget_micros is not None:
            spent = await self.spent(nc, key.id, now)  # cached by check(): no second query
            scopes.append(Scope(key_scope(key.id), key.monthly_budget_micros, spent))
        if key.team_id is not None and key.team_budget_micros is not None:
            spent = await self._spent(nc, (None, key.team_id), now)
            scopes.append(Scope(team_scope(key.team_id), key.team_budget_micros, spent))
        try:
            refused = await self._holds.reserve(uid, scopes, worst, month_of(now), expiry)
        except Exception as exc:
            decided = when_unreachable(key, self._enforcement)
            m.BUDGET_HOLD_UNAVAILABLE.labels(decided).inc()
            log.warning("budget hold store unreachable (%s): %r", decided, exc)
            # Redis may still run the call once it answers again (a frozen or slow server):
            # the hold it would make belongs to a request that goes on without one.
            self._void_later(uid, [scope.name for scope in scopes], expiry - now)
            if decided == "fail_closed":
                raise unavailable() from None
            return []
        if refused is not None:
            m.BUDGET_REFUSED.inc()
            team = refused.scope.name.startswith("team:")
            raise hold_refused(key, team, refused.spent + refused.held, worst, now)
        return [scope.name for scope in scopes]

    def _void_later(self, uid: str, scopes: list[str], lifetime: float) -> None:
        """Void ``uid``'s hold in the background. One task voids every waiting hold in one
        pipeline a second (not a task and a connection each: after an outage thousands wait,
        and the admissions need the hold store's connections), for VOID_TRIES seconds at most."""
        self._to_void.append((uid, scopes, lifetime, time.monotonic()))
        if self._voider is None or self._voider.done():
            self._voider = asyncio.ensure_future(self._void_waiting())

    async def _void_waiting(self) -> None:
        assert self._holds is not None
        while self._to_void:
            batch, self._to_void = self._to_void[:VOID_BATCH], self._to_void[VOID_BATCH:]
            try:
                await self._holds.void_all([(uid, scopes, life) for uid, scopes, life, _ in batch])
                continue
            except Exception:
                pass
            oldest = time.monotonic() - VOID_TRIES * VOID_EVERY
            kept = [entry for entry in batch if entry[3] > oldest]
            if len(kept) < len(batch):
                log.warning(
                    "could not void %d budget holds Redis may still make; they last until their"
                    " deadline",
                    len(batch) - len(kept),
                )
            self._to_void = kept + self._to_void
            await asyncio.sleep(VOID_EVERY)

    def ending(self, uids: list[str], scopes: list[str], free: bool = False) -> None:
        """``ended`` for each of ``uids``, in the background: the answer is not held back by
        a Redis round trip (a JSON answer is written only once its handler returns)."""
        if self._holds is None or not scopes:
            return

        async def end() -> None:
            for uid in uids:
                await self.ended(uid, scopes, free)

        self._background.spawn_guarded(end(), log, "ending budget holds failed")

    async def moved(self, uid: str, new_uid: str, scopes: list[str], expiry: float) -> None:
        """The request of ``uid`` is published again under ``new_uid``: its hold follows it."""
        if self._holds is None or not scopes:
            return
        try:
            await self._holds.moved(uid, new_uid, scopes, expiry)
        except Exception as exc:  # the first uid's hold then ends with the request (ended)
            log.warning("could not move the budget hold of a request published again: %r", exc)

    async def ended(self, uid: str, scopes: list[str], free: bool = False) -> None:
        """The request of ``uid`` ended: its hold waits for its row a short while at most, or,
        ``free`` (refused before any model ran), is dropped now."""
        if self._holds is None or not scopes:
            return
        try:
            await self._holds.ended(uid, scopes, free)
        except Exception as exc:  # the hold then lasts until its deadline: safe, only longer
            log.warning("could not shorten the budget hold of a finished request: %r", exc)

    async def spent(self, nc: bus.Client, key_id: str, now: float) -> int:
        return await self._spent(nc, (key_id, None), now)

    async def _spent(self, nc: bus.Client, owner: Owner, now: float) -> int:
        start = month_bounds(now)[0].timestamp()
        hit = self._cache.get(owner)
        fresh = hit is not None and hit[0] == start and time.monotonic() - hit[2] < self._ttl
        if hit is not None and fresh:
            return hit[1]
        pending = self._inflight.get(owner)
        if pending is None:  # one query per key at a time; concurrent requests share it
            pending = asyncio.ensure_future(self._query(nc, owner, start))
            self._inflight[owner] = pending
            pending.add_done_callback(lambda _: self._inflight.pop(owner, None))
        value = await asyncio.shield(pending)
        if value is None:  # billing did not answer: the last known spend of this month, or 0
            return hit[1] if hit is not None and hit[0] == start else 0
        self._cache[owner] = (start, value, time.monotonic())
        return value

    async def _query(self, nc: bus.Client, owner: Owner, start: float) -> int | None:
        key_id, team_id = owner
        query = envelopes.UsageQuery(key_id=key_id, team_id=team_id, since=start, limit=1)
        try:
            msg = await nc.request(
                self._subjects.usage_query, envelopes.encode(query), timeout=QUERY_TIMEOUT
            )
            reply = usage_page.decode_usage_reply(msg.data)
        except msgspec.DecodeError as exc:
            undecodable("usage_reply", self._subjects.usage_query, exc)
            return None
        except Exception as exc:  # any failure: fail open, loudly
            log.warning("monthly spend of %s unavailable: %r", key_id or team_id, exc)
            return None
        match reply:
            case usage_page.UsageError(error=error):
                log.warning("monthly spend of %s unavailable: %s", key_id or team_id, error)
                return None
            case page:
                # A pending row is not a charge yet, but budgets count it (as a hold).
                return page.totals.cost_micros + page.totals.pending_cost_micros
