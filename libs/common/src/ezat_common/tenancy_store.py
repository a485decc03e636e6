"""Teams, keys and the audit log in PostgreSQL, as the admin API changes them (docs/tenancy.md).

Every write runs in one transaction with the audit entry that records it (``audit.py``), so a
write is never without its entry nor an entry without its write. Appends are serialized by a
transaction-scoped advisory lock: the chain has one order. Objects are returned as the admin
API shows them (``team_json``, ``key_json``): never a secret nor a hash. The columns a caller
passes come from the edge's body checks (ezat_edge/core/admin_body.py) and are spelled here too,
so that no other name reaches the SQL.
"""

from __future__ import annotations

import datetime
import json
import secrets
from typing import Any, TypeAlias

import asyncpg

from . import audit, db
from .errors import GatewayError

AUDIT_LOCK = 7_424_027  # pg_advisory_xact_lock: one audit append at a time
TEAM_COLUMNS = frozenset(
    {"name", "models", "rpm", "tpm", "monthly_budget_micros", "budget_enforcement"}
)
KEY_COLUMNS = TEAM_COLUMNS | {"team_id", "user_name", "expires_at"}

Conn: TypeAlias = asyncpg.Connection
Json: TypeAlias = dict[str, Any]


# ---- JSON of the objects --------------------------------------------------------------------


def _time(value: datetime.datetime | None) -> str | None:
    if value is None:
        return None
    return value.astimezone(datetime.UTC).isoformat().replace("+00:00", "Z")


def _usd(micros: int | None) -> float | None:
    return None if micros is None else micros / 1_000_000


def _list(value: Any) -> list[str] | None:
    return None if value is None else list(value)


def team_json(row: Any) -> Json:
    return {
        "id": row["id"],
        "name": row["name"],
        "models": _list(row["models"]),
        "rpm": row["rpm"],
        "tpm": row["tpm"],
        "budget_usd": _usd(row["monthly_budget_micros"]),
        "budget_enforcement": row["budget_enforcement"],
        "created_at": _time(row["created_at"]),
        "updated_at": _time(row["updated_at"]),
        "keys": row["keys"],
    }


def key_json(row: Any) -> Json:
    return {
        "id": row["id"],
        "name": row["name"],
        "prefix": row["prefix"],
        "team": row["team_id"],
        "user": row["user_name"],
        "models": _list(row["models"]),
        "rpm": row["rpm"],
        "tpm": row["tpm"],
        "budget_usd": _usd(row["monthly_budget_micros"]),
        "budget_enforcement": row["budget_enforcement"],
        "expires_at": _time(row["expires_at"]),
        "created_at": _time(row["created_at"]),
        "updated_at": _time(row["updated_at"]),
        "revoked_at": _time(row["revoked_at"]),
    }


# ---- the audit log --------------------------------------------------------------------------


def _entry(row: Any) -> audit.Entry:
    return audit.Entry(
        seq=row["seq"],
        at=audit.at_text(row["at"]),
        actor=row["actor"],
        action=row["action"],
        target=row["target"],
        before=None if row["before"] is None else json.loads(row["before"]),
        after=None if row["after"] is None else json.loads(row["after"]),
        prev_hash=row["prev_hash"],
        hash=row["hash"],
    )


def _jsonb(value: Json | None) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False)


async def append_audit(
    conn: Conn, actor: str, action: str, target: str, before: Json | None, after: Json | None
) -> audit.Entry:
    """Chain an entry after the last one; call inside the write's transaction."""
    await conn.execute("SELECT pg_advisory_xact_lock($1)", AUDIT_LOCK)
    last = await conn.fetchrow("SELECT * FROM audit_log ORDER BY seq DESC LIMIT 1")
    moment = datetime.datetime.now(datetime.UTC)
    draft = audit.Entry(
        seq=0,
        at=audit.at_text(moment),
        actor=actor,
        action=action,
        target=target,
        # As jsonb gives them back, so that the hash is of what a reader will see.
        before=None if before is None else json.loads(_jsonb(before) or "null"),
        after=None if after is None else json.loads(_jsonb(after) or "null"),
    )
    entry = audit.chained(None if last is None else _entry(last), draft)
    await conn.execute(
        "INSERT INTO audit_log (seq, at, actor, action, target, before, after, prev_hash, hash)"
        " VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7::jsonb, $8, $9)",
        entry.seq,
        moment,
        actor,
        action,
        target,
        _jsonb(before),
        _jsonb(after),
        entry.prev_hash,
        entry.hash,
    )
    return entry


async def audit_entries(
    conn: Conn | asyncpg.Pool, since: int | datetime.datetime | None = None
) -> list[audit.Entry]:
    """The log ordered by seq: all of it, after seq ``since``, or at or after time ``since``."""
    if since is None:
        rows = await conn.fetch("SELECT * FROM audit_log ORDER BY seq")
    elif isinstance(since, int):
        rows = await conn.fetch("SELECT * FROM audit_log WHERE seq > $1 ORDER BY seq", since)
    else:
        rows = await conn.fetch("SELECT * FROM audit_log WHERE at >= $1 ORDER BY seq", since)
    return [_entry(r) for r in rows]


# ---- teams ----------------------------------------------------------------------------------

_TEAM = (
    "SELECT t.*, (SELECT count(*) FROM api_keys k WHERE k.team_id = t.id"
    " AND k.revoked_at IS NULL) AS keys FROM teams t"
)


def not_found(kind: str, ident: str) -> GatewayError:
    return GatewayError(
        404, f"no {kind} `{ident[:64]}`: GET /admin/v1/{kind}s lists them", type="not_found_error"
    )


def _name_taken(name: str) -> GatewayError:
    return GatewayError(409, f"name: a team named `{name}` already exists", param="name")


def _assignments(columns: dict[str, Any], allowed: frozenset[str]) -> tuple[str, list[Any]]:
    """``col = $n`` for each column (checked against ``allowed``), from $2 on ($1: the id)."""
    unknown = set(columns) - allowed
    if unknown:
        raise ValueError(f"not a column the admin API writes: {sorted(unknown)}")
    names = list(columns)
    sets = ", ".join(f"{name} = ${i}" for i, name in enumerate(names, start=2))
    return sets, [columns[n] for n in names]


async def teams(conn: Conn | asyncpg.Pool) -> list[Json]:
    return [team_json(r) for r in await conn.fetch(_TEAM + " ORDER BY t.created_at, t.id")]


async def team(conn: Conn | asyncpg.Pool, team_id: str, *, lock: bool = False) -> Json:
    row = await conn.fetchrow(_TEAM + " WHERE t.id = $1" + (" FOR UPDATE" if lock else ""), team_id)
    if row is None:
        raise not_found("team", team_id)
    return team_json(row)


async def create_team(conn: Conn, columns: dict[str, Any], actor: str) -> Json:
    team_id = "team_" + secrets.token_hex(8)
    _, values = _assignments(columns, TEAM_COLUMNS)
    names = ", ".join(columns)
    marks = ", ".join(f"${i}" for i in range(2, len(values) + 2))
    async with conn.transaction():
        try:
            await conn.execute(
                f"INSERT INTO teams (id, {names}) VALUES ($1, {marks})", team_id, *values
            )
        except asyncpg.UniqueViolationError:
            raise _name_taken(columns["name"]) from None
        after = await team(conn, team_id)
        await append_audit(conn, actor, "team.create", team_id, None, after)
    return after


async def update_team(conn: Conn, team_id: str, columns: dict[str, Any], actor: str) -> Json:
    sets, values = _assignments(columns, TEAM_COLUMNS)
    async with conn.transaction():
        before = await team(conn, team_id, lock=True)
        try:
            await conn.execute(
                f"UPDATE teams SET {sets}, updated_at = now() WHERE id = $1", team_id, *values
            )
        except asyncpg.UniqueViolationError:
            raise _name_taken(columns["name"]) from None
        after = await team(conn, team_id)
        await append_audit(conn, actor, "team.update", team_id, before, after)
    return after


async def delete_team(conn: Conn, team_id: str, actor: str) -> Json:
    """Delete a team that has no active key; its revoked keys leave it."""
    async with conn.transaction():
        before = await team(conn, team_id, lock=True)
        if before["keys"]:
            raise GatewayError(
                409,
                f"team `{team_id}` still has {before['keys']} active key(s): revoke them or move"
                ' them to another team (PATCH /admin/v1/keys/{id} with "team") first',
            )
        # Only revoked keys leave it: an active key a concurrent write just put in the team
        # (committed after this count's snapshot) keeps it, and the DELETE then fails on the
        # reference, a 409 like the count's, rather than taking a live key out of its team.
        await conn.execute(
            "UPDATE api_keys SET team_id = NULL WHERE team_id = $1 AND revoked_at IS NOT NULL",
            team_id,
        )
        try:
            await conn.execute("DELETE FROM teams WHERE id = $1", team_id)
        except asyncpg.ForeignKeyViolationError:  # the transaction is rolled back whole
            raise GatewayError(
                409, f"team `{team_id}` gained an active key meanwhile: revoke or move it first"
            ) from None
        await append_audit(conn, actor, "team.delete", team_id, before, None)
    return before


# ---- keys -----------------------------------------------------------------------------------


async def keys(conn: Conn | asyncpg.Pool, team_id: str | None = None) -> list[Json]:
    if team_id is None:
        rows = await conn.fetch("SELECT * FROM api_keys ORDER BY created_at, id")
    else:
        rows = await conn.fetch(
            "SELECT * FROM api_keys WHERE team_id = $1 ORDER BY created_at, id", team_id
        )
    return [key_json(r) for r in rows]


async def key(conn: Conn | asyncpg.Pool, key_id: str, *, lock: bool = False) -> Json:
    sql = "SELECT * FROM api_keys WHERE id = $1" + (" FOR UPDATE" if lock else "")
    row = await conn.fetchrow(sql, key_id)
    if row is None:
        raise not_found("key", key_id)
    return key_json(row)


async def _team_exists(conn: Conn, team_id: str | None) -> None:
    if (
        team_id is not None
        and await conn.fetchval("SELECT 1 FROM teams WHERE id = $1 FOR SHARE", team_id) is None
    ):
        raise GatewayError(
            400, f"team: no team `{team_id[:64]}` (GET /admin/v1/teams lists them)", param="team"
        )


async def create_key(conn: Conn, columns: dict[str, Any], actor: str) -> tuple[Json, str]:
    """The new key and its secret, which is shown once and kept nowhere."""
    _assignments(columns, KEY_COLUMNS)  # checks the names
    async with conn.transaction():
        await _team_exists(conn, columns.get("team_id"))
        made, secret = await db.create_key(
            conn,
            columns["name"],
            columns.get("rpm"),
            columns.get("tpm"),
            columns.get("monthly_budget_micros"),
            team_id=columns.get("team_id"),
            user=columns.get("user_name"),
            models=columns.get("models"),
            expires_at=columns.get("expires_at"),
            budget_enforcement=columns.get("budget_enforcement"),
        )
        after = await key(conn, made.id)
        await append_audit(conn, actor, "key.create", made.id, None, after)
    return after, secret


def _live(found: Json) -> None:
    if found["revoked_at"] is not None:
        raise GatewayError(
            409, f"key `{found['id']}` is revoked: create a new key instead", param="id"
        )


async def update_key(conn: Conn, key_id: str, columns: dict[str, Any], actor: str) -> Json:
    sets, values = _assignments(columns, KEY_COLUMNS)
    async with conn.transaction():
        before = await key(conn, key_id, lock=True)
        _live(before)
        await _team_exists(conn, columns.get("team_id"))
        await conn.execute(
            f"UPDATE api_keys SET {sets}, updated_at = now() WHERE id = $1", key_id, *values
        )
        after = await key(conn, key_id)
        await append_audit(conn, actor, "key.update", key_id, before, after)
    return after


async def rotate_key(conn: Conn, key_id: str, overlap: int, actor: str) -> tuple[Json, str]:
    """A new secret; the old one stays valid ``overlap`` seconds (0: not at all), then is
    refused as rotated rather than unknown (its hash is kept). A secret that an earlier
    rotation left in its overlap stops at once: only the latest one is kept."""
    secret = db.new_secret()
    async with conn.transaction():
        before = await key(conn, key_id, lock=True)
        _live(before)
        await conn.execute(
            "UPDATE api_keys SET"
            " previous_key_hash = key_hash,"
            " previous_valid_until = now() + make_interval(secs => $4::integer),"
            " key_hash = $2, prefix = $3, updated_at = now() WHERE id = $1",
            key_id,
            db.hash_key(secret),
            secret[:12],
            overlap,
        )
        after = await key(conn, key_id)
        await append_audit(conn, actor, "key.rotate", key_id, before, after)
    return after, secret


async def revoke_key(conn: Conn, key_id: str, actor: str) -> Json:
    """Revoked now, with its rotation overlap ended too; revoking a revoked key changes
    nothing and records nothing."""
    async with conn.transaction():
        before = await key(conn, key_id, lock=True)
        if before["revoked_at"] is not None:
            return before
        await conn.execute(
            "UPDATE api_keys SET revoked_at = now(), updated_at = now(),"
            " previous_key_hash = NULL, previous_valid_until = NULL WHERE id = $1",
            key_id,
        )
        after = await key(conn, key_id)
        await append_audit(conn, actor, "key.revoke", key_id, before, after)
    return after
