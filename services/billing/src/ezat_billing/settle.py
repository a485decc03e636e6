"""PostgreSQL adapter of "billed only when delivered" (docs/billing.md): the edge's delivery
confirmations, and the settling of complete records once their confirmation time is up.

A complete record is stored ``awaiting_delivery``. The edge confirms the uids whose final event it
wrote (``envelopes.Delivered``, through the usage outbox): a confirmation clears the flag of its
stored record at once (one UPDATE per drained batch), and only one whose record is not stored yet
(drained by another billing replica) is kept in ``usage_deliveries``, so that it still counts. Every
``SETTLE_EVERY`` seconds billing settles the records stored more than ``delivery_confirm`` before
the outbox's drain point (``outbox.drained_before``: the oldest message it still holds, or now):
a confirmation waits in the outbox behind the same backlog as the records (PostgreSQL or billing
down), so a record's time counts only up to what the drain has applied. Confirmed ones stay as
they are, the others become ``failed`` with cost 0 and error_type ``undelivered``. Settling is one
idempotent UPDATE; replicas running it at once skip each other's rows (``SKIP LOCKED``). Both
UPDATEs return the rows they settle, for the tokens and money metrics (ledger.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence

import asyncpg
from ezat_common.spend_counter import Row

from . import ledger, metrics

log = logging.getLogger("ezat.billing.settle")

SETTLE_EVERY = 5.0
SETTLE_BATCH = 5000
# Confirmations are kept this long: far longer than any record waits for its own.
KEEP_DELIVERIES = "1 day"
UNDELIVERED = "undelivered"

# Unix seconds before which every outbox message has been drained; None when unknown.
DrainedBefore = Callable[[], Awaitable[float | None]]
# Takes rows settled undelivered back from the budgets' spend counters (SpendCounter.uncount).
Uncount = Callable[[Sequence[Row]], Awaitable[None]]

_CLEAR = (
    "UPDATE usage_records r SET awaiting_delivery = false"
    f" WHERE r.uid = ANY($1::text[]) AND r.awaiting_delivery RETURNING {ledger.RETURNING}, r.uid"
)
# The confirmations that cleared nothing: records not stored yet (or that never awaited one, an
# early close: kept needlessly, and pruned with the rest).
_KEEP = "INSERT INTO usage_deliveries (uid) SELECT unnest($1::text[]) ON CONFLICT (uid) DO NOTHING"
_SETTLE = f"""
WITH due AS (
    SELECT r.uid, r.cost_micros AS counted_cost,
        EXISTS (SELECT 1 FROM usage_deliveries d WHERE d.uid = r.uid) AS delivered
    FROM usage_records r
    WHERE r.awaiting_delivery
      AND r.recorded_at < LEAST(now(), to_timestamp($2::float8)) - make_interval(secs => $1)
    ORDER BY r.recorded_at
    LIMIT {SETTLE_BATCH}
    FOR UPDATE OF r SKIP LOCKED
)
UPDATE usage_records r SET
    awaiting_delivery = false,
    status = CASE WHEN due.delivered THEN r.status ELSE 'failed' END,
    cost_micros = CASE WHEN due.delivered THEN r.cost_micros ELSE 0 END,
    error_type = CASE WHEN due.delivered THEN r.error_type ELSE '{UNDELIVERED}' END
FROM due WHERE r.uid = due.uid
RETURNING {ledger.RETURNING}, due.delivered, r.uid, r.key_id, due.counted_cost, r.received_at,
    r.team_id
"""
_PRUNE = f"DELETE FROM usage_deliveries WHERE delivered_at < now() - interval '{KEEP_DELIVERIES}'"


async def confirm(pool: asyncpg.Pool, uids: Sequence[str], timeout: float = 5.0) -> None:
    """Apply the edge's confirmations (idempotent): clear the flag of the stored records, keep the
    others for when their record arrives (settle_due looks them up)."""
    if not uids:
        return
    unique = list(set(uids))
    async with pool.acquire(timeout=timeout) as conn, conn.transaction():
        settled = await conn.fetch(_CLEAR, unique, timeout=timeout)
        cleared = {r["uid"] for r in settled}
        rest = [uid for uid in unique if uid not in cleared]
        if rest:
            await conn.execute(_KEEP, rest, timeout=timeout)
    ledger.count(settled)  # committed


async def settle_due(
    pool: asyncpg.Pool,
    after: float,
    drained_before: float,
    timeout: float = 10.0,
    uncount: Uncount | None = None,
) -> tuple[int, int]:
    """Settle the records whose confirmation time is up: stored more than ``after`` s before
    ``drained_before`` (Unix seconds; every confirmation published earlier has been applied) and
    before now; the voided ones go to ``uncount`` (their cost no longer spends a budget).
    Returns how many were (kept, voided)."""
    kept = voided = 0
    while True:
        async with pool.acquire(timeout=timeout) as conn, conn.transaction():
            rows = await conn.fetch(_SETTLE, after, drained_before, timeout=timeout)
        ledger.count(rows)  # committed, with their final status and cost
        lost = [
            (r["uid"], r["key_id"], r["counted_cost"], r["received_at"].timestamp(), r["team_id"])
            for r in rows
            if not r["delivered"]
        ]
        if uncount is not None and lost:
            await uncount(lost)
        kept += len(rows) - len(lost)
        voided += len(lost)
        if len(rows) < SETTLE_BATCH:
            return kept, voided


async def settle_round(
    pool: asyncpg.Pool, after: float, drained: DrainedBefore, uncount: Uncount | None = None
) -> None:
    """One round (billing runs it every ``SETTLE_EVERY`` s, ``periodic.Periodic``)."""
    drained_before = await drained()
    if drained_before is None:  # JetStream away: confirmations may be waiting there
        log.warning("settling delivered records skipped: the usage outbox does not answer")
        return
    behind = time.time() - drained_before
    if behind > after:
        log.warning(
            "settling held back: the usage outbox still holds messages of %.0f s ago", behind
        )
    try:
        kept, voided = await settle_due(pool, after, drained_before, uncount=uncount)
        await pool.execute(_PRUNE, timeout=10.0)
    except Exception as exc:  # PostgreSQL away: the next round settles what is due
        log.warning("settling delivered records failed: %r", exc)
        return
    if voided:
        metrics.UNDELIVERED.inc(voided)
        log.warning(
            "re-marked %d complete records failed: their delivery was never confirmed", voided
        )
    if kept:
        metrics.DELIVERED.inc(kept)
