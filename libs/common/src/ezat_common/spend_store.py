"""The spend report's query (``GET /admin/v1/spend``, ``ezat spend``; docs/billing.md, "Spend
reports"): the charged rows of ``usage_records`` grouped by any of team, key, user, model,
region, tag and day.

Charged rows are the settled ones (no longer awaiting their delivery confirmation) whose status
bills: ``complete`` and ``client_closed``. A pending row is not in the report yet; a failed or
undelivered one costs nothing and is left out with its tokens. So every figure is the plain sum
of the rows it groups, to the micro-dollar. Grouped by tag, a row counts under each of its tags
(and under ``""`` when it has none): tag groups add up to more than the rows with several tags.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Any

import asyncpg

# group name -> SQL expression of its value (text)
GROUPS: dict[str, str] = {
    "team": "coalesce(u.team_id, '')",
    "key": "u.key_id",
    "user": "coalesce(u.user_name, '')",
    "model": "u.model",
    "region": "u.region",
    "tag": "t.tag",
    "day": "to_char(u.received_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')",
}
# what each row of the report sums (the cache writes of both TTLs are one figure)
SUMS: tuple[tuple[str, str], ...] = (
    ("requests", "count(*)"),
    ("input_tokens", "sum(u.input_tokens)"),
    ("cache_read_tokens", "sum(u.cache_read_tokens)"),
    ("cache_write_tokens", "sum(u.cache_write_5m_tokens + u.cache_write_1h_tokens)"),
    ("output_tokens", "sum(u.output_tokens)"),
    ("cost_micros", "sum(u.cost_micros)"),
)
CHARGED = "NOT u.awaiting_delivery AND u.status IN ('complete', 'client_closed')"
_TAGS = (
    " CROSS JOIN LATERAL unnest(CASE WHEN cardinality(u.tags) = 0 THEN ARRAY['']::text[]"
    " ELSE u.tags END) AS t(tag)"
)


def spend_sql(group_by: Sequence[str]) -> str:
    """The report's statement; ``$1`` since (inclusive), ``$2`` until (exclusive), either NULL."""
    groups = [f"{GROUPS[g]} AS {g}" for g in group_by]
    sums = [f"{expr}::int8 AS {name}" for name, expr in SUMS]
    keys = ", ".join(str(i) for i in range(1, len(group_by) + 1))
    return (
        f"SELECT {', '.join([*groups, *sums])} FROM usage_records u"
        f"{_TAGS if 'tag' in group_by else ''}"
        f" WHERE {CHARGED}"
        " AND ($1::timestamptz IS NULL OR u.received_at >= $1)"
        " AND ($2::timestamptz IS NULL OR u.received_at < $2)"
        + (f" GROUP BY {keys} ORDER BY {keys}" if group_by else "")
    )


async def spend(
    conn: asyncpg.Connection,
    group_by: Sequence[str],
    since: datetime.datetime | None,
    until: datetime.datetime | None,
) -> list[dict[str, Any]]:
    """One dict per group: the group values, then the sums (``cost_micros`` an integer)."""
    rows = await conn.fetch(spend_sql(group_by), since, until)
    return [{name: (v if v is not None else 0) for name, v in r.items()} for r in rows]
