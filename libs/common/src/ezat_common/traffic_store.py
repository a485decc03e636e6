"""The console's overview series (``GET /admin/v1/traffic``; docs/console.md, "Overview"): the
usage rows of a window in equal time buckets.

Per bucket: every row is a request, a ``failed`` one an error; the time to first token's p50
and p99 over the rows that have one; tokens and cost of the charged rows only (the spend
report's rule, spend_store.CHARGED), so that the overview's spend equals the report's.
"""

from __future__ import annotations

import datetime
from typing import Any

import asyncpg

from .spend_store import CHARGED

TRAFFIC_SQL = (
    "SELECT to_timestamp(floor(extract(epoch FROM u.received_at) / $3) * $3) AS at,"
    " count(*)::int8 AS requests,"
    " (count(*) FILTER (WHERE u.status = 'failed'))::int8 AS errors,"
    " percentile_cont(0.5) WITHIN GROUP (ORDER BY u.ttft_ms) AS ttft_p50_ms,"
    " percentile_cont(0.99) WITHIN GROUP (ORDER BY u.ttft_ms) AS ttft_p99_ms,"
    f" coalesce(sum(u.input_tokens) FILTER (WHERE {CHARGED}), 0)::int8 AS input_tokens,"
    f" coalesce(sum(u.output_tokens) FILTER (WHERE {CHARGED}), 0)::int8 AS output_tokens,"
    f" coalesce(sum(u.cost_micros) FILTER (WHERE {CHARGED}), 0)::int8 AS cost_micros"
    " FROM usage_records u WHERE u.received_at >= $1 AND u.received_at < $2"
    " GROUP BY 1 ORDER BY 1"
)


async def traffic(
    conn: asyncpg.Connection,
    since: datetime.datetime,
    until: datetime.datetime,
    bucket_seconds: int,
) -> list[dict[str, Any]]:
    """One dict per bucket that has rows, oldest first; ``at`` the bucket's start."""
    rows = await conn.fetch(TRAFFIC_SQL, since, until, bucket_seconds)
    return [dict(r) for r in rows]
