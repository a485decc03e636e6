"""Budget soft thresholds (docs/billing.md, "Soft thresholds"): a real billing process on its own
PostgreSQL database counts the keys and teams whose month's spend (pending rows included)
reached 80 % and 100 % of their budget, on /metrics, with bounded labels only."""

from __future__ import annotations

import asyncio
import datetime
import time
import urllib.request
import uuid
from pathlib import Path

import asyncpg
import pytest
from ezat_cli.infra import Infra, free_port
from prometheus_client.parser import text_string_to_metric_families
from support.databases import fresh_database
from support.probes import Alone, alone

pytestmark = pytest.mark.timeout(120)

UTC = datetime.UTC
CHECK = {"budget_check_seconds": 0.3}


def samples(service: Alone, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    with urllib.request.urlopen(service.url + "/metrics", timeout=5) as resp:
        text = resp.read().decode()
    return {
        tuple(sorted(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name
    }


def gauge(service: Alone) -> dict[tuple[str, str], float]:
    found = samples(service, "ezat_billing_budget_scopes")
    return {(dict(k)["scope"], dict(k)["threshold"]): v for k, v in found.items()}


def until(read: object, expected: object, service: Alone, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    seen = None
    while time.monotonic() < deadline:
        assert service.proc.poll() is None, service.log.read_text()[-2000:]
        seen = read(service)  # type: ignore[operator]
        if seen == expected:
            return
        time.sleep(0.2)
    raise AssertionError(f"{seen} != {expected}")


async def _key(
    conn: asyncpg.Connection, budget: int | None, team: str | None, **more: object
) -> str:
    key_id = f"key_{uuid.uuid4().hex[:12]}"
    await conn.execute(
        "INSERT INTO api_keys (id, name, key_hash, prefix, monthly_budget_micros, team_id,"
        " revoked_at) VALUES ($1, $1, $2, 'ezat_sk_', $3, $4, $5)",
        key_id,
        uuid.uuid4().bytes,
        budget,
        team,
        more.get("revoked_at"),
    )
    return key_id


async def _row(
    conn: asyncpg.Connection, key_id: str, cost: int, pending: bool = False, **more: object
) -> None:
    uid = uuid.uuid4().hex
    await conn.execute(
        "INSERT INTO usage_records (uid, request_id, key_id, model, api, stream, deployment,"
        " region, status, cost_micros, prices, received_at, awaiting_delivery, error_type)"
        " VALUES ($1, $1, $2, 'anthropic/m', 'messages', false, 'd', 'local', $3, $4, '{}',"
        " $5, $6, $7)",
        uid,
        key_id,
        more.get("status", "complete"),
        cost,
        more.get("at", datetime.datetime.now(UTC)),
        pending,
        more.get("error_type"),
    )


async def seed(url: str) -> None:
    """A key at 85 % (a pending row among its rows, a row of last month left out), a team at
    100 % through two keys (one revoked since, its rows still the team's), a revoked key over its
    budget (no longer a scope), a key at 10 % and an undelivered row (cost 0)."""
    last_month = datetime.datetime.now(UTC).replace(day=1) - datetime.timedelta(days=2)
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(
            "INSERT INTO teams (id, name, monthly_budget_micros) VALUES ('t1', 't1', 2000000)"
        )
        k85 = await _key(conn, 1_000_000, None)
        await _row(conn, k85, 500_000)
        await _row(conn, k85, 350_000, pending=True)
        await _row(conn, k85, 9_000_000, at=last_month)
        await _row(conn, k85, 0, status="failed", error_type="undelivered")
        member = await _key(conn, None, "t1")
        await _row(conn, member, 1_200_000)
        gone = await _key(conn, None, "t1", revoked_at=datetime.datetime.now(UTC))
        await _row(conn, gone, 800_000, pending=True)
        revoked = await _key(conn, 100, None, revoked_at=datetime.datetime.now(UTC))
        await _row(conn, revoked, 1_000)
        k10 = await _key(conn, 1_000_000, None)
        await _row(conn, k10, 100_000)
    finally:
        await conn.close()


def test_keys_and_teams_over_each_threshold_show_on_billings_metrics(
    tmp_path: Path, infra: Infra
) -> None:
    url = asyncio.run(fresh_database(infra.database_url))
    asyncio.run(seed(url))
    with alone("ezat_billing", "billing", tmp_path, {"DATABASE_URL": url}, billing=CHECK) as b:
        b.until("/readyz", 200)
        until(
            gauge,
            {
                ("key", "0.8"): 1.0,
                ("key", "1.0"): 0.0,
                ("team", "0.8"): 1.0,
                ("team", "1.0"): 1.0,
            },
            b,
        )
        assert samples(b, "ezat_billing_budget_check_failures_total") == {(): 0.0}

        # A second row puts the key at 100 %: the next check says so.
        async def more() -> None:
            conn = await asyncpg.connect(url)
            try:
                key = await conn.fetchval(
                    "SELECT id FROM api_keys WHERE monthly_budget_micros = 1000000"
                    " AND id IN (SELECT key_id FROM usage_records WHERE cost_micros = 500000)"
                )
                await _row(conn, key, 150_000)
            finally:
                await conn.close()

        asyncio.run(more())
        until(lambda s: gauge(s)[("key", "1.0")], 1.0, b)


def test_a_failing_check_is_counted_and_billing_keeps_running(tmp_path: Path) -> None:
    nowhere = f"postgresql://postgres@127.0.0.1:{free_port()}/postgres"  # nothing listens
    with alone("ezat_billing", "billing", tmp_path, {"DATABASE_URL": nowhere}, billing=CHECK) as b:
        b.until("/readyz", 200)  # on the outbox
        until(lambda s: samples(s, "ezat_billing_budget_check_failures_total")[()] >= 2, True, b)
        assert set(gauge(b).values()) == {0.0}  # exported from the start, never set
        assert b.get("/healthz") == (200, {"status": "ok"})
