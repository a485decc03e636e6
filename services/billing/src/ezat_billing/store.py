"""PostgreSQL adapter of the usage records: idempotent batch inserts and the usage listing.

Idempotency comes from the table's primary key on ``uid`` (the request's identity, never the
client-chosen ``request_id``, which a client may reuse; migration 0002): a batch is one
``INSERT … SELECT FROM unnest(…) ON CONFLICT (uid) DO NOTHING`` in one transaction, and a
duplicate reports the cost already stored, so every retry of a record answers the same amount.
Results are keyed by uid. Rows newly stored settled (awaiting no delivery confirmation) are
counted in the tokens and money metrics (ledger.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import asyncpg
import msgspec
from ezat_common.envelopes import SERVER_TOOL_FIELDS, TOKEN_FIELDS
from ezat_common.usage_page import UsagePage
from msgspec import Struct

from . import ledger
from .core.page import to_page
from .core.query import Filters, to_filters
from .core.rows import UsageRow

# (column, PostgreSQL array type of its unnest parameter)
_COLUMNS: tuple[tuple[str, str], ...] = (
    ("uid", "text"),
    ("request_id", "text"),
    ("key_id", "text"),
    ("model", "text"),
    ("api", "text"),
    ("stream", "bool"),
    ("deployment", "text"),
    ("region", "text"),
    ("status", "text"),
    ("input_tokens", "int8"),
    ("cache_read_tokens", "int8"),
    ("cache_write_5m_tokens", "int8"),
    ("cache_write_1h_tokens", "int8"),
    ("output_tokens", "int8"),
    ("reasoning_tokens", "int8"),
    ("estimated", "bool"),
    ("cost_micros", "int8"),
    ("prices", "text"),  # jsonb travels as text and is cast once in SQL
    ("received_at", "timestamptz"),
    ("queued_ms", "float8"),
    ("ttft_ms", "float8"),
    ("total_ms", "float8"),
    ("error_type", "text"),
    ("awaiting_delivery", "bool"),
    ("deployment_kind", "text"),
    ("web_search_requests", "int8"),
    ("web_fetch_requests", "int8"),
    ("team_id", "text"),
    ("user_name", "text"),
    ("tags", "text"),  # a JSON array as text: unnest would flatten a text[][]
    ("session", "text"),
    ("client", "text"),
)
_CAST = {
    "prices": "r.prices::jsonb",
    "tags": "ARRAY(SELECT jsonb_array_elements_text(r.tags::jsonb))",
}
_NAMES = ", ".join(name for name, _ in _COLUMNS)
_INSERT = (
    f"INSERT INTO usage_records ({_NAMES}) "
    f"SELECT {', '.join(_CAST.get(n, 'r.' + n) for n, _ in _COLUMNS)} "
    f"FROM unnest({', '.join(f'${i}::{t}[]' for i, (_, t) in enumerate(_COLUMNS, 1))}) "
    f"AS r({_NAMES}) "
    "ON CONFLICT (uid) DO NOTHING RETURNING uid, cost_micros"
)
# A separate statement on purpose: it takes a fresh snapshot, so it also sees a duplicate that a
# concurrent transaction committed while our INSERT waited on its lock.
_EXISTING = "SELECT uid, cost_micros FROM usage_records WHERE uid = ANY($1::text[])"
_json = msgspec.json.Encoder()


class Stored(Struct, frozen=True):
    """The cost stored for a uid; ``inserted`` is False when the row was already there."""

    cost_micros: int
    inserted: bool


class OutcomeUnknown(Exception):
    """The write was sent but its answer was lost (connection failure, timeout): the batch may or
    may not be stored, and only a later look at the table can tell."""


async def insert_batch(
    pool: asyncpg.Pool, rows: Sequence[UsageRow], timeout: float | None = None
) -> dict[str, Stored]:
    """Store ``rows`` in one transaction; for each uid, the cost actually stored.

    The INSERT is a single statement, hence its own transaction: one round trip per batch.
    ``OutcomeUnknown`` means the statement was sent but its answer was lost (the rows may be
    stored); any other exception means nothing of this batch was written.
    """
    unique = _unique(rows)
    if not unique:
        return {}
    left = _budget(timeout)
    async with pool.acquire(timeout=left()) as conn:
        try:
            new = await conn.fetch(_INSERT, *_columns(unique), timeout=left())
            stored = {r["uid"]: Stored(r["cost_micros"], True) for r in new}
            # Committed from here on: a failure below must not read as "nothing written".
            ledger.count(
                ledger.of_row(row)
                for row in unique
                if row.uid in stored and not row.awaiting_delivery
            )
            await _add_existing(conn, unique, stored, left)
        except Exception as exc:
            if _not_written(exc):
                raise
            raise OutcomeUnknown(str(exc) or type(exc).__name__) from exc
    return stored


async def probe_stored(
    pool: asyncpg.Pool, rows: Sequence[UsageRow], timeout: float | None = None
) -> dict[str, int]:
    """Which of ``rows`` are durably stored, and at what cost, without storing the others.

    Runs the same INSERT and rolls it back: an INSERT waits for any transaction still holding one
    of these ids, so the answer cannot be overtaken by a write that was still in flight.
    """
    unique = _unique(rows)
    if not unique:
        return {}
    left = _budget(timeout)
    async with pool.acquire(timeout=left()) as conn:
        await conn.execute("BEGIN", timeout=left())
        try:
            new = await conn.fetch(_INSERT, *_columns(unique), timeout=left())
            stored = {r["uid"]: Stored(r["cost_micros"], True) for r in new}
            await _add_existing(conn, unique, stored, left)
        finally:
            await _rollback(conn)
    return {rid: s.cost_micros for rid, s in stored.items() if not s.inserted}


def _unique(rows: Sequence[UsageRow]) -> list[UsageRow]:
    # One row per uid (the first one wins), as the primary key would keep it.
    return list({row.uid: row for row in reversed(rows)}.values())


def _not_written(exc: Exception) -> bool:
    """Whether a failed write certainly stored nothing: the server refused the statement (or
    asyncpg could not encode its arguments, also a ``PostgresError``). A lost connection or a
    timeout leave it unknown."""
    uncertain = (asyncpg.PostgresConnectionError, asyncpg.exceptions.OperatorInterventionError)
    return isinstance(exc, asyncpg.PostgresError) and not isinstance(exc, uncertain)


def _budget(timeout: float | None) -> Callable[[], float | None]:
    """Seconds left of one attempt's ``timeout``, shared by all of its round trips."""
    if timeout is None:
        return lambda: None
    end = time.monotonic() + timeout
    return lambda: max(end - time.monotonic(), 0.001)


async def _add_existing(
    conn: asyncpg.Connection,
    rows: Sequence[UsageRow],
    stored: dict[str, Stored],
    left: Callable[[], float | None],
) -> None:
    """Fill in the rows the INSERT skipped as duplicates, with the cost stored earlier."""
    missing = [row.uid for row in rows if row.uid not in stored]
    if missing:
        for r in await conn.fetch(_EXISTING, missing, timeout=left()):
            stored[r["uid"]] = Stored(r["cost_micros"], False)


def _columns(rows: Sequence[UsageRow]) -> list[list[Any]]:
    columns: list[list[Any]] = []
    for name, _ in _COLUMNS:
        if name in _CAST:
            columns.append([_json.encode(getattr(row, name)).decode() for row in rows])
        else:
            columns.append([getattr(row, name) for row in rows])
    return columns


async def _rollback(conn: asyncpg.Connection) -> None:
    # On a broken connection ROLLBACK fails too; the server aborts the transaction when the
    # connection goes, and the pool replaces a broken connection on release.
    try:
        await conn.execute("ROLLBACK", timeout=1.0)
    except Exception:
        pass


# ---- the usage listing ------------------------------------------------------------------------

_COUNTS = (*TOKEN_FIELDS, *SERVER_TOOL_FIELDS)
_RECORD_COLUMNS = (
    "uid, request_id, model, api, stream, status, deployment, deployment_kind, region, "
    f"{', '.join(_COUNTS)}, estimated, cost_micros, received_at, ttft_ms, total_ms, "
    "awaiting_delivery, team_id, user_name, tags, session, client"
)
# Totals count settled rows only; a row still awaiting its delivery confirmation is pending,
# not a charge (docs/billing.md, "Pending rows"), and counted apart.
_SETTLED = "FILTER (WHERE NOT awaiting_delivery)"
_SUMS = ", ".join(f"(sum({c}) {_SETTLED})::int8 AS {c}" for c in _COUNTS)
_SETTLED_COST = f"(sum(cost_micros) {_SETTLED})::int8"
_PENDING_COST = "(sum(cost_micros) FILTER (WHERE awaiting_delivery))::int8"
_PENDING = (
    "count(*) FILTER (WHERE awaiting_delivery) AS pending_requests, "
    f"{_PENDING_COST} AS pending_cost_micros"
)
# What a budget counts of a group of rows: the totals' cost plus their pending cost, as the
# edge reads the usage query (docs/billing.md, "Budget holds"); budgets.py groups it per key.
BUDGET_SPENT = f"coalesce({_SETTLED_COST}, 0) + coalesce({_PENDING_COST}, 0)"


async def query_usage(
    pool: asyncpg.Pool,
    key_id: str | None,
    since: float | None,
    until: float | None,
    model: str | None,
    limit: int,
    cursor: str | None,
    timeout: float | None = 10.0,
    *,
    team_id: str | None = None,
) -> UsagePage:
    """One page of records (newest first) and totals over the whole filter, not just the page.

    ``key_id`` None lists every key (operators' ``ezat usage``); ``since`` is inclusive and
    ``until`` exclusive (epoch seconds); ``team_id``: the keys that belong to that team now
    (a team's budget, docs/tenancy.md). Raises ``QueryError`` before touching the database.
    """
    f = to_filters(key_id, since, until, model, limit, cursor, team_id)
    where, args = _filters(f)
    page_where, page_args = where, list(args)
    if f.after is not None:
        n = len(page_args)
        # uid breaks ties: request ids may repeat, uids never do.
        page_where += f" AND (received_at, uid) < (${n + 1}, ${n + 2})"
        page_args += [f.after.received_at, f.after.uid]
    records_sql = (
        f"SELECT {_RECORD_COLUMNS} FROM usage_records WHERE {page_where} "
        f"ORDER BY received_at DESC, uid DESC LIMIT {f.limit + 1}"
    )
    totals_sql = (
        f"SELECT count(*) {_SETTLED} AS requests, {_SUMS}, "
        f"{_SETTLED_COST} AS cost_micros, {_PENDING} "
        f"FROM usage_records WHERE {where}"
    )
    days_sql = (
        "SELECT (received_at AT TIME ZONE 'UTC')::date AS day, model, "
        f"count(*) {_SETTLED} AS requests, "
        f"(sum(input_tokens) {_SETTLED})::int8 AS input_tokens, "
        f"(sum(output_tokens) {_SETTLED})::int8 AS output_tokens, "
        f"(sum(cost_micros) {_SETTLED})::int8 AS cost_micros FROM usage_records WHERE {where} "
        "GROUP BY 1, 2 ORDER BY 1 DESC, 2"
    )
    # One snapshot for the three reads, so that the totals agree with the page.
    async with (
        pool.acquire(timeout=timeout) as conn,
        conn.transaction(isolation="repeatable_read", readonly=True),
    ):
        records = await conn.fetch(records_sql, *page_args, timeout=timeout)
        totals = await conn.fetchrow(totals_sql, *args, timeout=timeout)
        days = await conn.fetch(days_sql, *args, timeout=timeout)
    return to_page(records, f.limit, totals, days)


def _filters(f: Filters) -> tuple[str, list[Any]]:
    clauses: list[str] = ["TRUE"]
    args: list[Any] = []
    for template, value in (
        ("key_id = {}", f.key_id),
        ("key_id IN (SELECT id FROM api_keys WHERE team_id = {})", f.team_id),
        ("received_at >= {}", f.since),
        ("received_at < {}", f.until),
        ("model = {}", f.model),
    ):
        if value is not None:
            args.append(value)
            clauses.append(template.format(f"${len(args)}"))
    return " AND ".join(clauses), args
