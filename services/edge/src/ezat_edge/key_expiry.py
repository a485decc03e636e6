"""The key-expiry gauge (``ezat_edge_key_expiry_seconds``, docs/tenancy.md, "Expiry alerts"):
every ``[edge] key_expiry_interval`` seconds one small query, on the key lookups' pool and off
any request's path, reads the soonest expiry of each team's active keys; core/key_expiry.py
bounds the labels. Every edge exports the same series (the rules take the minimum over them).

A series' value is computed when it is scraped (its expiry less the time then), so it keeps
counting down between refreshes and while the database is unreachable: a failed refresh keeps
the last expiries read, logs one line, and never raises.
"""

from __future__ import annotations

import logging
import time
from functools import partial

import asyncpg
from ezat_common.periodic import Periodic

from . import metrics as m
from .auth import Authenticator
from .core.key_expiry import seconds_left, soonest_by_team

log = logging.getLogger("ezat.edge.key_expiry")

# Seconds an expired key stays in the gauge (a negative value): the alerts keep saying so for a
# day after it expired, then it drops out. Revoked keys never count.
JUST_EXPIRED = 86400.0
# Seconds the refresh may wait for a connection, and then for its answer: it never holds one of
# the key lookups' connections for longer.
QUERY_TIMEOUT = 5.0
# Seconds between looks for the pool while the edge is still connecting to PostgreSQL.
POOL_WAIT = 1.0
# InternalClientError: a connection the server terminated while asyncpg was between states (seen
# once in CI: "cannot switch to state 12"); it is not an InterfaceError.
_DB_ERRORS = (
    OSError,
    TimeoutError,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
)

# One row per team (NULL: keys without a team), soonest first. Beyond the kept teams only the
# first row matters (the folded teams' soonest), and a team named "none" may share the label of
# keys without a team: two rows more than the labels kept are always enough.
SOONEST = """
SELECT t.name AS team, min(k.expires_at) AS soonest
FROM api_keys k LEFT JOIN teams t ON t.id = k.team_id
WHERE k.revoked_at IS NULL AND k.expires_at > now() - make_interval(secs => $1)
GROUP BY t.name
ORDER BY soonest, team
LIMIT $2
"""


class KeyExpiry:
    """Refreshes the gauge on its own task until stopped."""

    def __init__(self, auth: Authenticator, teams: int, interval: float) -> None:
        self._auth = auth
        self._teams = teams
        self._interval = interval
        self._shown: dict[str, float] = {}
        # Every second until the key lookups' pool is made, so that a starting edge shows the
        # expiries at once; then every ``interval``.
        self._periodic = Periodic("key-expiry", min(interval, POOL_WAIT), self.refresh)

    def start(self) -> None:
        self._periodic.start()

    async def stop(self) -> None:
        await self._periodic.stop()

    async def refresh(self) -> None:
        """One refresh; the pool not made yet or the database unreachable: nothing changes.
        asyncpg's own timeouts bound it (a cancelled query would wait in the pool's release)."""
        pool = self._auth.pool
        if pool is None:
            return
        self._periodic.interval = self._interval
        try:
            async with pool.acquire(timeout=QUERY_TIMEOUT) as conn:
                rows = await conn.fetch(
                    SOONEST, JUST_EXPIRED, self._teams + 2, timeout=QUERY_TIMEOUT
                )
        except _DB_ERRORS as exc:
            log.warning(
                "key expiries not refreshed (the last ones are kept): %s", type(exc).__name__
            )
            return
        found = ((row["team"], row["soonest"].timestamp()) for row in rows)
        self.show(soonest_by_team(found, self._teams))

    def show(self, soonest: dict[str, float]) -> None:
        """The gauge's series become ``soonest``'s: changed ones set, gone ones removed (never
        cleared first: a scrape meanwhile would see none)."""
        for team, expires_at in soonest.items():
            if self._shown.get(team) != expires_at:
                m.KEY_EXPIRY.labels(team).set_function(partial(_left, expires_at))
        for team in self._shown.keys() - soonest.keys():
            m.KEY_EXPIRY.remove(team)
        self._shown = soonest


def _left(expires_at: float) -> float:
    return seconds_left(expires_at, time.time())
