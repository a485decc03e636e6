"""API-key authentication with a short in-process cache.

Keys are looked up by their SHA-256 hash in PostgreSQL. Results are cached for
``edge.auth_cache_ttl`` seconds so the database is not on the hot path; ``ezat keys revoke``
broadcasts the revoked id on NATS and every edge evicts it at once, so the TTL is only a fallback.
"""

from __future__ import annotations

import logging
import time

import asyncpg
from aiohttp import web
from ezat_common import db
from ezat_common.errors import GatewayError

log = logging.getLogger("ezat.edge.auth")

_NEGATIVE_TTL = 1.0
_MAX_ENTRIES = 100_000


def presented_key(request: web.Request) -> str | None:
    key = request.headers.get("x-api-key")
    if key:
        return key.strip()
    auth = request.headers.get("authorization", "")
    scheme, _, value = auth.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return None


class Authenticator:
    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self.pool: asyncpg.Pool | None = None
        self._cache: dict[bytes, tuple[db.ApiKey | None, float]] = {}

    async def authenticate(self, request: web.Request) -> db.ApiKey:
        secret = presented_key(request)
        if secret is None:
            raise GatewayError(
                401,
                "missing API key: send it in the x-api-key header or as Authorization: Bearer",
                type="authentication_error",
            )
        digest = db.hash_key(secret)
        now = time.monotonic()
        hit = self._cache.get(digest)
        if hit is not None and hit[1] > now:
            key = hit[0]
        else:
            key = await self._lookup(secret) if db.looks_like_key(secret) else None
            if len(self._cache) >= _MAX_ENTRIES:
                self._cache.clear()
            self._cache[digest] = (key, now + (self.ttl if key else _NEGATIVE_TTL))
        if key is None or key.revoked:
            raise GatewayError(
                401,
                "invalid API key: it is unknown or has been revoked",
                type="authentication_error",
            )
        return key

    async def _lookup(self, secret: str) -> db.ApiKey | None:
        if self.pool is None:
            raise GatewayError(503, "authentication is unavailable; retry shortly", retry_after=2)
        try:
            return await db.find_key(self.pool, secret)
        except (OSError, asyncpg.PostgresError) as exc:
            log.warning("key lookup failed: %s", type(exc).__name__)
            raise GatewayError(
                503, "authentication is unavailable; retry shortly", retry_after=2
            ) from None

    def evict(self, key_id: str) -> None:
        for digest, (key, _) in list(self._cache.items()):
            if key is not None and key.id == key_id:
                del self._cache[digest]
