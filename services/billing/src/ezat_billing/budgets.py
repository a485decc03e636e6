"""Budget soft thresholds (docs/billing.md, "Soft thresholds"): every ``[billing]
budget_check_seconds`` one query reads, for the current UTC month, the budget and the spend of
every active key with a budget and of every team with one, and ``ezat_billing_budget_scopes``
says how many reached each of ``[billing] budget_thresholds`` (core/thresholds.py). The labels
are the scope's kind and the threshold: which keys or teams is the spend report's to say.

The spend is the edge's (store.BUDGET_SPENT: the usage query's cost plus its pending cost); a
team's is that of every key that belongs to it now, as the edge's usage query counts it. A check
that fails (PostgreSQL down, the statement timeout) is logged and counted, and the gauge keeps
its last values until a check succeeds.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

import asyncpg

from . import metrics
from .core.thresholds import KINDS, Scope, counts, label, month_bounds
from .store import BUDGET_SPENT

log = logging.getLogger("ezat.billing.budgets")

# One check waits at most this long for a connection and for its statement.
CHECK_TIMEOUT = 10.0

# Only the rows of keys that count in a budget (their own, or their team's) are read, through
# the (key_id, received_at) index; $1 and $2 bound the month.
SCOPES_SQL = f"""
WITH keys AS (
    SELECT k.id, k.team_id, k.monthly_budget_micros AS budget,
           k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > now()) AS active
    FROM api_keys k LEFT JOIN teams t ON t.id = k.team_id
    WHERE k.monthly_budget_micros IS NOT NULL OR t.monthly_budget_micros IS NOT NULL
), spent AS (
    SELECT key_id, {BUDGET_SPENT} AS spent FROM usage_records
    WHERE key_id IN (SELECT id FROM keys) AND received_at >= $1 AND received_at < $2
    GROUP BY key_id
)
SELECT 'key' AS scope, k.budget, coalesce(s.spent, 0)::int8 AS spent
FROM keys k LEFT JOIN spent s ON s.key_id = k.id
WHERE k.active AND k.budget IS NOT NULL
UNION ALL
SELECT 'team', t.monthly_budget_micros, coalesce(sum(s.spent), 0)::int8
FROM teams t LEFT JOIN keys k ON k.team_id = t.id LEFT JOIN spent s ON s.key_id = k.id
WHERE t.monthly_budget_micros IS NOT NULL
GROUP BY t.id, t.monthly_budget_micros
"""


async def scopes(pool: asyncpg.Pool, now: float, timeout: float = CHECK_TIMEOUT) -> list[Scope]:
    """Every budget scope of the month of ``now`` with its budget and spend: one statement."""
    start, end = month_bounds(now)
    async with pool.acquire(timeout=timeout) as conn:
        rows = await conn.fetch(SCOPES_SQL, start, end, timeout=timeout)
    return [Scope(r["scope"], int(r["budget"]), int(r["spent"])) for r in rows]


class BudgetCheck:
    """The periodic step: read the scopes, set the gauge; a failure never escapes it."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        thresholds: Sequence[float],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._pool = pool
        self._thresholds = list(thresholds)
        self._clock = clock
        for kind in KINDS:  # exported from the start, at 0 until the first check
            for t in self._thresholds:
                metrics.BUDGET_SCOPES.labels(kind, label(t))

    async def run(self) -> None:
        try:
            found = await scopes(self._pool, self._clock())
        except Exception as exc:
            metrics.BUDGET_CHECK_FAILURES.inc()
            log.warning("budget check failed: %r", exc)
            return
        for (kind, threshold), n in counts(found, self._thresholds).items():
            metrics.BUDGET_SCOPES.labels(kind, threshold).set(n)
