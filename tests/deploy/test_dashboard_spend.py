"""The Money dashboard's spend tables (deploy/grafana/dashboards.py: "Spend per team", "Top
keys") run on a real PostgreSQL holding usage rows, Grafana's time macros substituted as its
PostgreSQL data source does, and equal the spend report (``GET /admin/v1/spend``'s query,
ezat_common.spend_store) over the same range to the micro-dollar."""

from __future__ import annotations

import asyncio
import datetime
import sys
import uuid
from pathlib import Path
from typing import Any

import asyncpg
from ezat_cli.infra import Infra
from ezat_common import spend_store
from support.databases import fresh_database

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "deploy" / "grafana"))
import dashboards  # noqa: E402

UTC = datetime.UTC
SINCE = datetime.datetime(2026, 5, 1, tzinfo=UTC)
UNTIL = datetime.datetime(2026, 5, 8, tzinfo=UTC)


def grafana(sql: str, since: datetime.datetime, until: datetime.datetime) -> str:
    """``sql`` as Grafana's PostgreSQL data source sends it: ``$__timeFrom()`` and
    ``$__timeTo()`` become quoted RFC 3339 UTC times."""
    stamp = "'%Y-%m-%dT%H:%M:%SZ'"
    return sql.replace("$__timeFrom()", since.strftime(stamp)).replace(
        "$__timeTo()", until.strftime(stamp)
    )


async def seed(conn: asyncpg.Connection) -> None:
    """12 keys in 3 teams (and none), rows inside and outside the range, charged, pending,
    failed and client-closed, odd costs so that every micro-dollar counts."""
    rows: list[tuple[Any, ...]] = []
    for i in range(120):
        key, team = f"key_{i % 12:02d}", [None, "t_a", "t_b", "t_c"][i % 4]
        at = SINCE + datetime.timedelta(hours=i * 1.7 - 10)  # some before, some after
        status = ["complete", "complete", "client_closed", "failed"][i % 4 if i % 5 else 0]
        cost = 0 if status == "failed" else 1_000 + i * 7_919 + (i % 3)
        rows.append((uuid.uuid4().hex, key, team, status, cost, at, i % 11 == 0))
    await conn.executemany(
        "INSERT INTO usage_records (uid, request_id, key_id, team_id, model, api, stream,"
        " deployment, region, status, cost_micros, prices, received_at, awaiting_delivery)"
        " VALUES ($1, $1, $2, $3, 'anthropic/m', 'messages', false, 'd', 'local', $4, $5, '{}',"
        " $6, $7)",
        rows,
    )


async def both(url: str) -> dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]]]]:
    money = dashboards.build(dashboards.MONEY)
    panels = dashboards.sql_panels(money)
    conn = await asyncpg.connect(url)
    try:
        await seed(conn)
        out = {}
        for title, group in (("Spend per team", "team"), ("Top keys", "key")):
            shown = [dict(r) for r in await conn.fetch(grafana(panels[title], SINCE, UNTIL))]
            report = await spend_store.spend(conn, [group], SINCE, UNTIL)
            out[group] = (shown, report)
        return out
    finally:
        await conn.close()


def test_the_spend_tables_are_the_spend_report_to_the_micro_dollar(infra: Infra) -> None:
    url = asyncio.run(fresh_database(infra.database_url))
    results = asyncio.run(both(url))

    shown, report = results["team"]
    assert [(r["team"], r["requests"], r["cost_micros"]) for r in shown] == [
        (r["team"], r["requests"], r["cost_micros"]) for r in report
    ]
    assert {r["team"] for r in shown} == {"", "t_a", "t_b", "t_c"}
    assert all(r["cost_usd"] * 1_000_000 == r["cost_micros"] for r in shown)  # exact decimal

    shown, report = results["key"]
    top = sorted(report, key=lambda r: (-r["cost_micros"], r["key"]))[:10]
    assert [(r["key"], r["requests"], r["cost_micros"]) for r in shown] == [
        (r["key"], r["requests"], r["cost_micros"]) for r in top
    ]
    assert len(report) > 10 and len(shown) == 10
    assert sum(r["cost_micros"] for r in report) > 0
