"""``/admin/v1``: teams, keys and the audit log for the operator (docs/tenancy.md, "Admin API
reference"; docs/openapi.yaml).

Thin: the operator's token is checked as for ``/api/status`` (status.authorise), a body is
checked by core/admin_body.py, the write and its audit entry are one transaction of
ezat_common.tenancy_store, and after the commit every edge is told (``keys_changed``; a
revocation also ``keys_revoked``, which edges already obey). The admin API has a small database
pool of its own, made on first use: never the connections key lookups use.
"""

from __future__ import annotations

import asyncio
import datetime
import hashlib
import logging
import re
from typing import Any

import asyncpg
import msgspec
from aiohttp import web
from ezat_common import audit as audit_chain
from ezat_common import bus, db, environment, spend_store, tenancy_store, traffic_store
from ezat_common.catalogue import Catalogue
from ezat_common.errors import GatewayError
from ezat_common.subjects import Subjects
from ezat_common.tenancy import Changed

from .auth import Authenticator
from .console_sessions import EndedSessions
from .core import admin_body as body
from .core import request_log, spend, traffic
from .responses import JSON
from .status import authorise

log = logging.getLogger("ezat.edge.admin")

CONNECTIONS = 2  # the admin pool's
BODY_MAX = 64 * 1024  # bytes of an admin request body
DB_TIMEOUT = 10.0  # seconds to get a connection
PUBLISH_TIMEOUT = 2  # seconds
# A lost database, and a transaction PostgreSQL rolled back (deadlock, serialization): retry.
_DB_ERRORS = (
    OSError,
    TimeoutError,
    asyncpg.PostgresConnectionError,
    asyncpg.InterfaceError,
    asyncpg.exceptions.TransactionRollbackError,
)

PREFIX = "/admin/v1"


def _ident(value: str, kind: str) -> str:
    """An id as the store makes them (``key_`` or ``team_`` and 16 hex digits); anything else
    (a NUL, an overlong path) is the 404 of an id never made, before any query."""
    if not _IDS[kind].fullmatch(value):
        raise tenancy_store.not_found(kind, value.encode("unicode_escape").decode("ascii"))
    return value


_IDS = {kind: re.compile(rf"{kind}_[0-9a-f]{{16}}") for kind in ("key", "team")}


def _unavailable() -> GatewayError:
    return GatewayError(503, "the database is unavailable; retry shortly", retry_after=2)


def _json(value: Any, status: int = 200) -> web.Response:
    return web.Response(status=status, body=msgspec.json.encode(value), content_type=JSON)


async def _read(request: web.Request) -> dict[str, Any]:
    if request.content_length is not None and request.content_length > BODY_MAX:
        raise GatewayError(
            413, f"request body: larger than {BODY_MAX} bytes", type="request_too_large"
        )
    raw = await request.content.read(BODY_MAX + 1)
    while len(raw) <= BODY_MAX and not request.content.at_eof():
        more = await request.content.read(BODY_MAX + 1 - len(raw))
        if not more:
            break
        raw += more
    if len(raw) > BODY_MAX:
        raise GatewayError(
            413, f"request body: larger than {BODY_MAX} bytes", type="request_too_large"
        )
    return body.parse(raw)


class Admin:
    def __init__(
        self,
        nc: bus.Client,
        subjects: Subjects,
        catalogue: Catalogue,
        auth: Authenticator,
        token: str | None = None,
    ) -> None:
        self.nc = nc
        self.subjects = subjects
        self.catalogue = catalogue
        self.auth = auth
        token = token if token is not None else environment.operator_token()
        self._token = hashlib.sha256(token.encode()).digest() if token else None
        self.pool: asyncpg.Pool | None = None
        self._connecting = asyncio.Lock()
        # Console sessions signed out, checked on this API's pool (docs/console.md).
        self.sessions = EndedSessions(self._pool)

    # ---- plumbing --------------------------------------------------------------------------

    def _resolve(self, name: str) -> str | None:
        model = self.catalogue.resolve(name)
        return None if model is None else model.id

    async def _actor(self, request: web.Request) -> str:
        await authorise(request, self._token, self.sessions)
        return body.actor(request.headers.get(body.ACTOR_HEADER))

    async def _pool(self) -> asyncpg.Pool:
        async with self._connecting:
            if self.pool is None:
                try:
                    self.pool = await db.pool(min_size=1, max_size=CONNECTIONS)
                except (*_DB_ERRORS, asyncpg.PostgresError):
                    log.warning("admin: database not reachable")
                    raise _unavailable() from None
            return self.pool

    async def _run(self, write: Any, *args: Any) -> Any:
        """``write(conn, *args)`` on an admin connection; a lost database is a 503."""
        pool = await self._pool()
        try:
            async with pool.acquire(timeout=DB_TIMEOUT) as conn:
                return await write(conn, *args)
        except _DB_ERRORS:
            log.warning("admin: database call failed")
            raise _unavailable() from None

    async def _tell(self, changed: Changed, revoked: str | None = None) -> None:
        """Every edge drops what it holds of the key or team (after the commit): every write
        is told, a create too, so that an edge's view of a team's keys never lags."""
        try:
            await self.nc.publish(self.subjects.keys_changed, msgspec.json.encode(changed))
            if revoked is not None:
                await self.nc.publish(self.subjects.keys_revoked, revoked.encode())
            await self.nc.flush(timeout=PUBLISH_TIMEOUT)
        except Exception as exc:  # the write stands; the edges' cache TTL is the fallback
            log.warning("admin: change not broadcast: %s", type(exc).__name__)

    # ---- teams -----------------------------------------------------------------------------

    async def create_team(self, request: web.Request) -> web.Response:
        actor = await self._actor(request)
        columns = body.team_create(await _read(request), self._resolve)
        made = await self._run(tenancy_store.create_team, columns, actor)
        await self._tell(Changed(team=made["id"]))
        return _json(made, 201)

    async def list_teams(self, request: web.Request) -> web.Response:
        await self._actor(request)
        return _json({"data": await self._run(tenancy_store.teams)})

    async def get_team(self, request: web.Request) -> web.Response:
        await self._actor(request)
        return _json(
            await self._run(tenancy_store.team, _ident(request.match_info["team_id"], "team"))
        )

    async def update_team(self, request: web.Request) -> web.Response:
        actor = await self._actor(request)
        columns = body.team_patch(await _read(request), self._resolve)
        team_id = _ident(request.match_info["team_id"], "team")
        changed = await self._run(tenancy_store.update_team, team_id, columns, actor)
        await self._tell(Changed(team=team_id))
        return _json(changed)

    async def delete_team(self, request: web.Request) -> web.Response:
        actor = await self._actor(request)
        team_id = _ident(request.match_info["team_id"], "team")
        gone = await self._run(tenancy_store.delete_team, team_id, actor)
        await self._tell(Changed(team=team_id))
        return _json(gone)

    # ---- keys ------------------------------------------------------------------------------

    def _now(self) -> datetime.datetime:
        return datetime.datetime.now(datetime.UTC)

    async def create_key(self, request: web.Request) -> web.Response:
        actor = await self._actor(request)
        columns = body.key_create(await _read(request), self._resolve, self._now())
        made, secret = await self._run(tenancy_store.create_key, columns, actor)
        await self._tell(Changed(key=made["id"]))
        return _json({**made, "key": secret}, 201)

    async def list_keys(self, request: web.Request) -> web.Response:
        await self._actor(request)
        team = request.query.get("team") or None
        if team is not None:
            _ident(team, "team")
        return _json({"data": await self._run(tenancy_store.keys, team)})

    async def get_key(self, request: web.Request) -> web.Response:
        await self._actor(request)
        return _json(
            await self._run(tenancy_store.key, _ident(request.match_info["key_id"], "key"))
        )

    async def update_key(self, request: web.Request) -> web.Response:
        actor = await self._actor(request)
        columns = body.key_patch(await _read(request), self._resolve, self._now())
        key_id = _ident(request.match_info["key_id"], "key")
        changed = await self._run(tenancy_store.update_key, key_id, columns, actor)
        await self._tell(Changed(key=key_id))
        return _json(changed)

    async def rotate_key(self, request: web.Request) -> web.Response:
        actor = await self._actor(request)
        overlap = body.overlap_seconds(await _read(request))
        key_id = _ident(request.match_info["key_id"], "key")
        rotated, secret = await self._run(tenancy_store.rotate_key, key_id, overlap, actor)
        await self._tell(Changed(key=key_id))
        return _json({**rotated, "key": secret})

    async def revoke_key(self, request: web.Request) -> web.Response:
        actor = await self._actor(request)
        body.no_fields(await _read(request))
        key_id = _ident(request.match_info["key_id"], "key")
        revoked = await self._run(tenancy_store.revoke_key, key_id, actor)
        self.auth.evict(key_id)  # this edge at once; the others by the broadcast
        await self._tell(Changed(key=key_id), revoked=key_id)
        return _json(revoked)

    # ---- audit -----------------------------------------------------------------------------

    async def audit(self, request: web.Request) -> web.Response:
        await self._actor(request)
        since = body.since(request.query.get("since"))
        entries = await self._run(tenancy_store.audit_entries, since)
        return _json({"data": entries})

    async def audit_verify(self, request: web.Request) -> web.Response:
        """The whole chain checked here, as ``ezat audit verify`` does (docs/console.md)."""
        await self._actor(request)
        entries = await self._run(tenancy_store.audit_entries, None)
        broken = audit_chain.verify(entries)
        return _json(
            {
                "verified": not broken,
                "entries": len(entries),
                "last_seq": entries[-1].seq if entries else 0,
                "broken_seqs": broken[:100],
            }
        )

    # ---- the console's overview series (docs/console.md, "Overview") ------------------------

    async def traffic(self, request: web.Request) -> web.Response:
        await self._actor(request)
        w = traffic.window(request.query, self._now())
        rows = await self._run(traffic_store.traffic, w.since, w.until, w.bucket_seconds)
        return _json(traffic.to_json(w, rows))

    # ---- spend reports (docs/billing.md, "Spend reports") ------------------------------------

    async def spend_report(self, request: web.Request) -> web.Response:
        await self._actor(request)
        q = spend.to_query(request.query)
        rows = await self._run(spend_store.spend, q.group_by, q.since, q.until)
        if q.csv:
            return web.Response(
                body=spend.to_csv(q.group_by, rows), content_type="text/csv", charset="utf-8"
            )
        return _json({"object": "list", "group_by": q.group_by, "data": spend.to_json_rows(rows)})

    # ---- request log (docs/observability.md, "Request log") ---------------------------------

    async def requests(self, request: web.Request) -> web.Response:
        await self._actor(request)
        q = request_log.to_query(request.query)
        sql, args = request_log.to_sql(q)
        rows = await self._run(_fetch, sql, args)
        return _json(request_log.to_page(rows, q.limit))

    async def close(self) -> None:
        if self.pool is not None:
            await self.pool.close()


ROUTES: tuple[tuple[str, str, str], ...] = (
    ("POST", PREFIX + "/teams", "create_team"),
    ("GET", PREFIX + "/teams", "list_teams"),
    ("GET", PREFIX + "/teams/{team_id}", "get_team"),
    ("PATCH", PREFIX + "/teams/{team_id}", "update_team"),
    ("DELETE", PREFIX + "/teams/{team_id}", "delete_team"),
    ("POST", PREFIX + "/keys", "create_key"),
    ("GET", PREFIX + "/keys", "list_keys"),
    ("GET", PREFIX + "/keys/{key_id}", "get_key"),
    ("PATCH", PREFIX + "/keys/{key_id}", "update_key"),
    ("POST", PREFIX + "/keys/{key_id}/rotate", "rotate_key"),
    ("POST", PREFIX + "/keys/{key_id}/revoke", "revoke_key"),
    ("GET", PREFIX + "/audit", "audit"),
    ("GET", PREFIX + "/spend", "spend_report"),
    ("GET", PREFIX + "/requests", "requests"),
    ("GET", PREFIX + "/audit/verify", "audit_verify"),
    ("GET", PREFIX + "/traffic", "traffic"),
)


async def _fetch(conn: asyncpg.Connection, sql: str, args: list[Any]) -> list[asyncpg.Record]:
    rows: list[asyncpg.Record] = await conn.fetch(sql, *args)
    return rows
