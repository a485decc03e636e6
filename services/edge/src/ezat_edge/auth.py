"""API-key authentication with a short in-process cache that outlives a database outage.

Keys are looked up by their SHA-256 hash in PostgreSQL. Results are cached for
``edge.auth_cache_ttl`` seconds so the database is not on the hot path; a revocation broadcasts
the revoked id on NATS (``keys_revoked``) and every edge marks it revoked at once, and any other
change of a key or a team (limits, models, budget, expiry, rotation: ``keys_changed``) drops
what every edge caches of it, looked up again on its next use (a changed key is a 503 while the
database is down, never its old rights); after a NATS reconnect every entry turns stale (a
broadcast may have been missed). So the TTL is only a fallback (docs/tenancy.md, "How a request
is authorized"). Expiry and the end of a rotation's overlap are checked on every request from
the cached key (core/authorization.py).

While PostgreSQL is unreachable (a lookup failed or timed out), a key this edge already knows is
served from its cache past the TTL (serve-stale): the database is asked again at most once per
``RETRY_DOWN`` seconds, by the next request of an expired entry, and the others do not wait for
it. A revocation broadcast during the outage still applies: the entry becomes a revoked one, and
that is what is served. Only keys the edge does not know wait for the database: 503 with
``retry-after``. asyncpg's pool reconnects by itself once the server is back (a connection found
closed is replaced when it is next acquired); the first query on a connection the restart killed
fails, so a lookup is tried twice.
"""

from __future__ import annotations

import asyncio
import logging
import time

import asyncpg
import msgspec
from aiohttp import web
from ezat_common import db
from ezat_common.errors import GatewayError
from ezat_common.tasks import TaskSet
from ezat_common.tenancy import Changed
from ezat_common.undecodable import undecodable

from . import metrics as m
from .core.authorization import refusal
from .request_log import entry_of

log = logging.getLogger("ezat.edge.auth")

_NEGATIVE_TTL = 1.0
_MAX_ENTRIES = 100_000
LOOKUP_TIMEOUT = 2.0  # seconds a key lookup may take before the database counts as unreachable
RETRY_DOWN = 1.0  # seconds known keys are served stale without asking the database again
_DB_ERRORS = (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError)


_decode_change = msgspec.json.Decoder(Changed).decode


class _Unavailable(Exception):
    pass


def unavailable() -> GatewayError:
    return GatewayError(503, "authentication is unavailable; retry shortly", retry_after=2)


def presented_key(request: web.Request) -> str | None:
    """The key a request presents. Both headers are ASCII: the middleware refuses any other
    value before a handler runs (core/inputs.py), so the key can be hashed."""
    headers = request.headers
    key = headers.get("x-api-key")
    auth = headers.get("authorization")
    if key:
        return key.strip()
    scheme, _, value = (auth or "").partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return None


class Authenticator:
    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self.pool: asyncpg.Pool | None = None
        self._cache: dict[bytes, tuple[db.ApiKey | None, float]] = {}
        self._down_until = 0.0  # until then, known keys whose entry expired are served stale
        self._lookups = TaskSet()  # still running
        # One more at every change heard: a lookup that overlapped one may have read the row as
        # it was before, so what it found is kept stale (looked up again on its next use).
        self._changes = 0
        # Every key id a revocation broadcast named (revocation is for good), oldest first: a
        # lookup that read the row before the revocation is stored revoked all the same.
        self._revoked: dict[str, None] = {}

    async def authenticate(self, request: web.Request) -> db.ApiKey:
        secret = presented_key(request)
        if secret is None:
            m.AUTH_MISSING.inc()
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
        elif hit is not None and hit[0] is not None and self._down_until > now:
            key = hit[0]  # the database is down: what this edge knows stands
            m.AUTH_STALE.inc()
        elif not db.looks_like_key(secret):
            key = None
            self._store(digest, None, now)
        else:
            changes = self._changes
            try:
                key = await self._lookup(secret)
            except _Unavailable:
                if hit is None or hit[0] is None:
                    m.AUTH_UNAVAILABLE.inc()
                    raise unavailable() from None
                key = hit[0]
                m.AUTH_STALE.inc()
            else:
                if key is not None and not key.revoked and key.id in self._revoked:
                    key = msgspec.structs.replace(key, revoked=True)
                self._store(digest, key, None if changes != self._changes else now)
        if key is not None:
            _named(request, key)
        if key is None or key.revoked:
            (m.AUTH_INVALID if key is None else m.AUTH_REVOKED).inc()
            raise GatewayError(
                401,
                "invalid API key: it is unknown or has been revoked",
                type="authentication_error",
            )
        refused = refusal(key, time.time())
        if refused is not None:
            (m.AUTH_EXPIRED if refused.reason == "expired" else m.AUTH_ROTATED).inc()
            raise refused.error
        return key

    def _store(self, digest: bytes, key: db.ApiKey | None, now: float | None = None) -> None:
        """Cache what a lookup found; ``now`` None: stale already (a change overlapped it)."""
        cache = self._cache
        if len(cache) >= _MAX_ENTRIES and digest not in cache:
            # Unknown keys go first; never all the known ones at once (they carry an outage).
            for d in [d for d, (k, _) in cache.items() if k is None]:
                del cache[d]
            if len(cache) >= _MAX_ENTRIES:
                for d in list(cache)[: _MAX_ENTRIES // 10]:  # the oldest tenth
                    del cache[d]
        if now is None:
            cache[digest] = (key, 0.0)
        else:
            cache[digest] = (key, now + (self.ttl if key else _NEGATIVE_TTL))

    async def _lookup(self, secret: str) -> db.ApiKey | None:
        """The key as stored, within ``LOOKUP_TIMEOUT`` whatever the database does: the lookup
        runs as a task of its own that is waited for, never cancelled (``_find``)."""
        pool = self.pool
        if pool is None:
            raise _Unavailable
        lookup = self._lookups.spawn(_find(pool, secret))
        lookup.add_done_callback(_forget)
        done, _ = await asyncio.wait({lookup}, timeout=LOOKUP_TIMEOUT)
        problem = lookup.exception() if done else TimeoutError("no answer")
        if problem is None:
            return lookup.result()
        self._down_until = time.monotonic() + RETRY_DOWN
        log.warning("key lookup failed: %s", type(problem).__name__)
        raise _Unavailable

    def knows_keys(self) -> bool:
        """Some key is cached that this edge would serve while PostgreSQL is down (readiness:
        the edge still authenticates the clients it has seen)."""
        return any(key is not None and not key.revoked for key, _ in self._cache.values())

    def heard_change(self, data: bytes, subject: str) -> None:
        """A ``keys_changed`` broadcast (``tenancy.Changed``); one that cannot be decoded is
        dropped (counted), the TTL then being the fallback."""
        try:
            change = _decode_change(data)
        except msgspec.DecodeError as exc:
            undecodable("keys_changed", subject, exc)
            return
        self.changed(change.key, change.team)

    def changed(self, key_id: str | None = None, team_id: str | None = None) -> int:
        """A key (``key_id``) or every key of a team (``team_id``) changed: their cached entries
        are dropped, looked up again on their next use. Dropped, not kept stale: a change may
        take rights away (a rotation, an earlier expiry, fewer models), and while the database
        cannot answer a key this edge holds no current row of is a 503, never its old rights.
        Returns how many were dropped. Unknown secrets are forgotten too: a change may have made
        one valid (a rotation)."""
        self._changes += 1
        dropped = 0
        for digest, (key, _) in list(self._cache.items()):
            if key is None:
                del self._cache[digest]
            elif key.id == key_id or (team_id is not None and key.team_id == team_id):
                del self._cache[digest]
                dropped += 1
        return dropped

    def missed_broadcasts(self) -> int:
        """The NATS connection was lost and is back: a change or revocation broadcast meanwhile
        never arrived, so every cached entry becomes stale: looked up again on its next use, and
        served as it was while the database cannot answer (an outage of both is not turned into
        an outage of every key). Returns how many."""
        self._changes += 1
        stale = 0
        for digest, (key, until) in list(self._cache.items()):
            if key is None:
                del self._cache[digest]
            elif until:
                self._cache[digest] = (key, 0.0)
                stale += 1
        return stale

    def evict(self, key_id: str) -> None:
        """A revocation: every cached entry of the key becomes a revoked one (which is what is
        served if the database cannot be asked when it expires)."""
        self._changes += 1
        self._revoked[key_id] = None
        if len(self._revoked) > _MAX_ENTRIES:
            del self._revoked[next(iter(self._revoked))]
        until = time.monotonic() + self.ttl
        for digest, (key, _) in list(self._cache.items()):
            if key is not None and key.id == key_id:
                self._cache[digest] = (msgspec.structs.replace(key, revoked=True), until)


async def _find(pool: asyncpg.Pool, secret: str) -> db.ApiKey | None:
    """The lookup, ended by asyncpg's own timeouts (the acquire's, the query's and, through the
    acquire's, the release of a connection whose query was cancelled), so that it ends by itself
    when the server is there but never answers (frozen, a network partition). Cancelling it
    instead would leave the request waiting in the pool's release, which asyncpg shields from
    cancellation and which, without a timeout, waits for the server's answer to the cancel: the
    request hung for as long as the database did. A connection killed by a restart fails once,
    then reconnects: so twice."""
    problem: BaseException = TimeoutError()
    for _ in range(2):
        try:
            async with pool.acquire(timeout=LOOKUP_TIMEOUT) as conn:
                return await db.find_key(conn, secret, timeout=LOOKUP_TIMEOUT)
        except _DB_ERRORS as exc:
            problem = exc
    raise problem


def _forget(lookup: asyncio.Future[db.ApiKey | None]) -> None:
    """A lookup its request stopped waiting for may still fail: nobody reads that."""
    if not lookup.cancelled():
        lookup.exception()


def _named(request: web.Request, key: db.ApiKey) -> None:
    """The request log's entry names the key (its id, never its secret) and its team: a refusal
    of a revoked, expired or rotated key too."""
    entry = entry_of(request)
    if entry is not None:
        entry.key_id = key.id
        entry.team_id = key.team_id
