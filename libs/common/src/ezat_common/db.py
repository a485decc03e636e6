"""PostgreSQL: connection settings, schema migrations and the API-key store.

Migrations are the numbered ``migrations/*.sql`` files, applied once each, in order, under an
advisory lock so that concurrent ``ezat migrate`` runs (several pods starting) do not race.
"""

from __future__ import annotations

import datetime
import hashlib
import secrets
from importlib import resources
from typing import Any, Literal, get_args

import asyncpg
from msgspec import Struct

from . import environment

KEY_PREFIX = "ezat_sk_"
# What a request held on a budget gets while the hold store is unreachable (docs/billing.md,
# "Budget holds"): per key and per team, NULL (None) meaning the edge's configured default.
Enforcement = Literal["fail_closed", "fail_open"]
ENFORCEMENTS: tuple[Enforcement, ...] = get_args(Enforcement)
_MIGRATION_LOCK = 7_424_011


def database_url() -> str:
    return environment.database_url()


async def connect() -> asyncpg.Connection:
    return await asyncpg.connect(database_url())


async def pool(
    min_size: int = 1, max_size: int = 10, connect_timeout: float = 60.0
) -> asyncpg.Pool:
    """``connect_timeout``: how long a new connection may take (asyncpg's default: 60 s)."""
    return await asyncpg.create_pool(
        database_url(), min_size=min_size, max_size=max_size, timeout=connect_timeout
    )


def _migrations() -> list[tuple[str, str]]:
    folder = resources.files("ezat_common") / "migrations"
    files = sorted((p.name, p) for p in folder.iterdir() if p.name.endswith(".sql"))
    return [(name, p.read_text()) for name, p in files]


async def migrate(conn: asyncpg.Connection) -> list[str]:
    """Apply pending migrations; returns the names applied now."""
    applied_now: list[str] = []
    await conn.execute("SELECT pg_advisory_lock($1)", _MIGRATION_LOCK)
    try:
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        done = {r["name"] for r in await conn.fetch("SELECT name FROM schema_migrations")}
        for name, sql in _migrations():
            if name in done:
                continue
            async with conn.transaction():
                await conn.execute(sql)
                await conn.execute("INSERT INTO schema_migrations (name) VALUES ($1)", name)
            applied_now.append(name)
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", _MIGRATION_LOCK)
    return applied_now


# ---- API keys -------------------------------------------------------------------------------


class ApiKey(Struct, kw_only=True):
    """A key as the edge authorizes it: its own limits, and its team's (docs/tenancy.md)."""

    id: str
    name: str
    prefix: str
    rpm: int | None = None
    tpm: int | None = None
    monthly_budget_micros: int | None = None
    created_at: str = ""
    revoked: bool = False
    team_id: str | None = None
    team_name: str | None = None
    user: str | None = None
    models: tuple[str, ...] | None = None  # the key's own list; None: every model
    team_models: tuple[str, ...] | None = None
    team_rpm: int | None = None
    team_tpm: int | None = None
    team_budget_micros: int | None = None
    expires_at: float | None = None  # Unix seconds; None: never
    # Set when the secret presented is the one a rotation replaced: valid until then (Unix s).
    secret_valid_until: float | None = None
    # Per scope, when the hold store is unreachable; None: the edge's `[edge] budget_enforcement`.
    budget_enforcement: Enforcement | None = None
    team_budget_enforcement: Enforcement | None = None


def hash_key(secret: str) -> bytes:
    # Keys carry 256 random bits, so a fast hash is enough: there is nothing to brute-force.
    return hashlib.sha256(secret.encode()).digest()


def looks_like_key(secret: str) -> bool:
    return secret.startswith(KEY_PREFIX) and 16 <= len(secret) <= 128


def _epoch(value: Any) -> float | None:
    return None if value is None else float(value.timestamp())


def _names(value: Any) -> tuple[str, ...] | None:
    return None if value is None else tuple(value)


def _row_to_key(row: Any) -> ApiKey:
    fields = row.keys()
    team = "team_name" in fields  # find_key joins the team; plain listings do not
    via_previous = "via_previous" in fields and row["via_previous"]
    return ApiKey(
        id=row["id"],
        name=row["name"],
        prefix=row["prefix"],
        rpm=row["rpm"],
        tpm=row["tpm"],
        monthly_budget_micros=row["monthly_budget_micros"],
        created_at=row["created_at"].isoformat(),
        revoked=row["revoked_at"] is not None,
        team_id=row["team_id"],
        team_name=row["team_name"] if team else None,
        user=row["user_name"],
        models=_names(row["models"]),
        team_models=_names(row["team_models"]) if team else None,
        team_rpm=row["team_rpm"] if team else None,
        team_tpm=row["team_tpm"] if team else None,
        team_budget_micros=row["team_budget_micros"] if team else None,
        expires_at=_epoch(row["expires_at"]),
        secret_valid_until=_epoch(row["previous_valid_until"]) if via_previous else None,
        budget_enforcement=row["budget_enforcement"],
        team_budget_enforcement=row["team_budget_enforcement"] if team else None,
    )


async def create_key(
    conn: asyncpg.Connection,
    name: str,
    rpm: int | None = None,
    tpm: int | None = None,
    monthly_budget_micros: int | None = None,
    *,
    team_id: str | None = None,
    user: str | None = None,
    models: list[str] | None = None,
    expires_at: datetime.datetime | None = None,
    budget_enforcement: Enforcement | None = None,
) -> tuple[ApiKey, str]:
    """Returns the stored key and its secret; the secret is not kept anywhere."""
    secret = new_secret()
    key_id = "key_" + secrets.token_hex(8)
    row = await conn.fetchrow(
        "INSERT INTO api_keys (id, name, key_hash, prefix, rpm, tpm, monthly_budget_micros,"
        " team_id, user_name, models, expires_at, budget_enforcement)"
        " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) RETURNING *",
        key_id,
        name,
        hash_key(secret),
        secret[:12],
        rpm,
        tpm,
        monthly_budget_micros,
        team_id,
        user,
        models,
        expires_at,
        budget_enforcement,
    )
    return _row_to_key(row), secret


def new_secret() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


# The key a secret names (its current one, or the one its last rotation replaced: valid while
# the overlap lasts, then refused as rotated rather than unknown: the edge's
# core/authorization.py), with its team's list and limits: one indexed query, on a cache miss.
_FIND_KEY = """
SELECT k.*, t.name AS team_name, t.models AS team_models, t.rpm AS team_rpm,
       t.tpm AS team_tpm, t.monthly_budget_micros AS team_budget_micros,
       t.budget_enforcement AS team_budget_enforcement,
       k.key_hash <> $1 AS via_previous
FROM api_keys k LEFT JOIN teams t ON t.id = k.team_id
WHERE k.key_hash = $1
   OR (k.previous_key_hash = $1 AND k.previous_valid_until IS NOT NULL)
"""


async def find_key(
    conn: asyncpg.Connection | asyncpg.Pool, secret: str, timeout: float | None = None
) -> ApiKey | None:
    row = await conn.fetchrow(_FIND_KEY, hash_key(secret), timeout=timeout)
    return _row_to_key(row) if row else None


async def list_keys(conn: asyncpg.Connection) -> list[ApiKey]:
    rows = await conn.fetch("SELECT * FROM api_keys ORDER BY created_at")
    return [_row_to_key(r) for r in rows]


async def revoke_key(conn: asyncpg.Connection, key_id: str) -> bool:
    result: str = await conn.execute(
        "UPDATE api_keys SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL", key_id
    )
    return result.endswith(" 1")
