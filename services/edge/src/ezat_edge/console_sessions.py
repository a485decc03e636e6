"""The console's ended sessions (docs/console.md, "Sign-in"), shared by every edge through
PostgreSQL.

A console session is a stateless signed cookie (core/console_session.py), so signing out could
only clear the browser's copy; a copied cookie and its CSRF token would have kept admin access
until the cookie's expiry. Signing out therefore stores the session's nonce in
``console_sessions_ended`` until that expiry, and the operator check (status.authorise) asks
here, on the admin API's own pool, before it lets a cookie through: a console call is not a
client request's path. The database away: the cookie is refused (503), never let through
unchecked; the operator token (``Authorization: Bearer``) still works.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import asyncpg
from ezat_common.errors import GatewayError

from .core import console_session

log = logging.getLogger("ezat.edge.console")

TIMEOUT = 5.0  # seconds for a check or a sign-out
_DB_ERRORS = (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError)

ENDED_SQL = "SELECT 1 FROM console_sessions_ended WHERE nonce = $1"
END_SQL = """
INSERT INTO console_sessions_ended (nonce, expires_at) VALUES ($1, to_timestamp($2))
ON CONFLICT (nonce) DO NOTHING
"""
FORGET_SQL = "DELETE FROM console_sessions_ended WHERE expires_at < now()"

Pool = Callable[[], Awaitable[asyncpg.Pool]]


def unavailable() -> GatewayError:
    return GatewayError(
        503,
        "the console session cannot be checked: the database is unavailable; retry shortly "
        "(the operator token, as Authorization: Bearer, still works)",
        retry_after=2,
    )


class EndedSessions:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool  # the admin API's (admin.Admin._pool): made on first use

    async def ended(self, cookie: str) -> bool:
        """Whether the session of ``cookie`` (a valid one) was signed out; a 503 when the
        database cannot say."""
        nonce, _expiry = console_session.nonce_and_expiry(cookie)
        try:
            pool = await self._pool()
            async with pool.acquire(timeout=TIMEOUT) as conn:
                found = await conn.fetchval(ENDED_SQL, nonce, timeout=TIMEOUT)
        except (*_DB_ERRORS, GatewayError) as exc:
            log.warning("console: session not checked: %s", type(exc).__name__)
            raise unavailable() from None
        return found is not None

    async def end(self, cookie: str) -> None:
        """Sign the session of ``cookie`` (a valid one) out on every edge, and forget the ended
        sessions past their expiry (a cookie past it is refused anyway)."""
        nonce, expiry = console_session.nonce_and_expiry(cookie)
        try:
            pool = await self._pool()
            async with pool.acquire(timeout=TIMEOUT) as conn:
                await conn.execute(END_SQL, nonce, float(expiry), timeout=TIMEOUT)
                await conn.execute(FORGET_SQL, timeout=TIMEOUT)
        except (*_DB_ERRORS, GatewayError) as exc:
            log.warning("console: session not ended: %s", type(exc).__name__)
            raise unavailable() from None
