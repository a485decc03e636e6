"""Spend reports (docs/billing.md, "Spend reports"): ``GET /admin/v1/spend`` in JSON and CSV and
``ezat spend`` reconcile to the micro-dollar with the charged rows, summed both ways; a row still
awaiting its delivery confirmation is pending in ``/api/usage`` and in no report, and a second
publish of a request (never confirmed) is never a second charge."""

from __future__ import annotations

import asyncio
import csv
import datetime
import io
import json
import os
import subprocess
import sys
import uuid
from collections import defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Any

import aiohttp
import anthropic
import asyncpg

from .conftest import Gateway
from .test_attribution import settled, team_and_key

MODEL = "anthropic/claude-sonnet-5-5"
SUMS = ("requests", "input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens")
EZAT = str(Path(sys.executable).parent / "ezat")


def ezat(gateway: Gateway, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **gateway.stack.env(), "EZAT_URL": gateway.url}
    return subprocess.run(
        [EZAT, *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )


async def spend_load(gateway: Gateway, secret: str) -> list[str]:
    """Requests of both APIs, several models and tags: their request ids."""
    ids = []
    async with anthropic.AsyncAnthropic(base_url=gateway.url, api_key=secret) as claude:
        for i in range(6):
            raw = await claude.messages.with_raw_response.create(
                model=MODEL if i % 3 else "anthropic/claude-instant-sim",
                max_tokens=32,
                messages=[{"role": "user", "content": f"spend {i} [sim:tokens={i + 2}]"}],
                extra_headers={"x-ezat-tags": "a,b" if i % 2 else "a"},
            )
            ids.append(raw.headers["request-id"])
    async with gateway.openai(api_key=secret) as gpt:
        for i in range(3):
            raw = await gpt.chat.completions.with_raw_response.create(
                model=MODEL, max_tokens=32, messages=[{"role": "user", "content": f"o {i}"}]
            )
            ids.append(raw.headers["request-id"])
    return ids


async def rows_of_team(gateway: Gateway, team: str) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(gateway.database_url)
    try:
        return await conn.fetch(
            "SELECT *, to_char(received_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day"
            " FROM usage_records WHERE team_id = $1 AND NOT awaiting_delivery"
            " AND status IN ('complete', 'client_closed')",
            team,
        )
    finally:
        await conn.close()


def sums_by(rows: list[asyncpg.Record], *groups: str) -> dict[tuple[str, ...], dict[str, int]]:
    """The rows summed by hand, as the report should group them."""
    out: dict[tuple[str, ...], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for row in rows:
        values: dict[str, list[str]] = {
            "team": [row["team_id"]],
            "key": [row["key_id"]],
            "user": [row["user_name"] or ""],
            "model": [row["model"]],
            "region": [row["region"]],
            "day": [row["day"]],
            "tag": list(row["tags"]) or [""],
        }
        combos: list[tuple[str, ...]] = [()]
        for g in groups:
            combos = [(*c, v) for c in combos for v in values[g]]
        for combo in combos:
            s = out[combo]
            s["requests"] += 1
            s["input_tokens"] += row["input_tokens"]
            s["cache_read_tokens"] += row["cache_read_tokens"]
            s["cache_write_tokens"] += row["cache_write_5m_tokens"] + row["cache_write_1h_tokens"]
            s["output_tokens"] += row["output_tokens"]
            s["cost_micros"] += row["cost_micros"]
    return {k: dict(v) for k, v in out.items()}


async def test_spend_report_reconciles_with_the_rows_in_json_csv_and_cli(
    gateway: Gateway, http: aiohttp.ClientSession
) -> None:
    team, key_id, secret = await team_and_key(gateway, http, user="bob")
    ids = await spend_load(gateway, secret)
    await settled(gateway, ids)
    rows = await rows_of_team(gateway, team)
    assert len(rows) == len(ids)
    auth = {"authorization": f"Bearer {gateway.stack.operator_token}"}
    for groups in (("team", "model"), ("team", "key", "user", "region", "day"), ("team", "tag")):
        expected = sums_by(rows, *groups)
        query = {"group_by": ",".join(groups)}
        async with http.get(gateway.url + "/admin/v1/spend", params=query, headers=auth) as r:
            assert r.status == 200, await r.text()
            report = await r.json()
        got = {tuple(d[g] for g in groups): d for d in report["data"] if d["team"] == team}
        assert set(got) == set(expected), groups
        for combo, sums in expected.items():
            assert {n: got[combo][n] for n in sums} == sums, (groups, combo)
            assert got[combo]["cost_usd"] == sums["cost_micros"] / 1_000_000
        async with http.get(
            gateway.url + "/admin/v1/spend", params={**query, "format": "csv"}, headers=auth
        ) as r:
            assert r.headers["content-type"].startswith("text/csv")
            table = list(csv.DictReader(io.StringIO(await r.text())))
        mine = [line for line in table if line["team"] == team]
        assert len(mine) == len(expected)
        for line in mine:
            sums = expected[tuple(line[g] for g in groups)]
            assert {n: int(line[n]) for n in (*SUMS, "cost_micros")} == sums
            assert Decimal(line["cost_usd"]) == Decimal(sums["cost_micros"]) / 1_000_000
    # both ways: the grand total of the rows equals the sum of the report's groups
    total = sum(row["cost_micros"] for row in rows)
    assert sum(v["cost_micros"] for v in sums_by(rows, "model").values()) == total

    out = await asyncio.to_thread(ezat, gateway, "spend", "--by", "team,model", "--csv")
    assert out.returncode == 0, out.stderr
    cli = [line for line in csv.DictReader(io.StringIO(out.stdout)) if line["team"] == team]
    assert sum(int(line["cost_micros"]) for line in cli) == total
    out = await asyncio.to_thread(ezat, gateway, "spend", "--by", "team,key")
    assert out.returncode == 0, out.stderr
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith(team))
    assert key_id in line and f"${total // 1_000_000}.{total % 1_000_000:06d}" in line
    out = await asyncio.to_thread(ezat, gateway, "usage", "--key", key_id, "--json")
    assert out.returncode == 0, out.stderr
    listed = json.loads(out.stdout)
    assert listed["totals"]["cost_micros"] == total
    assert listed["totals"]["requests"] == len(ids)
    assert {item["client"] for item in listed["data"]} == {"anthropic-sdk", "openai-sdk"}
    assert {item["user"] for item in listed["data"]} == {"bob"}
    out = await asyncio.to_thread(ezat, gateway, "usage", "--key", key_id, "--csv")
    lines = list(csv.DictReader(io.StringIO(out.stdout)))
    assert sum(int(line["cost_micros"]) for line in lines) == total
    out = await asyncio.to_thread(ezat, gateway, "usage", "--key", key_id)
    assert out.stdout.splitlines()[-1].startswith(f"total\t{len(ids)} requests")


async def test_a_bad_group_is_a_400_naming_it(
    gateway: Gateway, http: aiohttp.ClientSession
) -> None:
    auth = {"authorization": f"Bearer {gateway.stack.operator_token}"}
    for query, param in (
        ({"group_by": "team,colour"}, "group_by"),
        ({"since": "last week"}, "since"),
        ({"format": "xml"}, "format"),
    ):
        async with http.get(gateway.url + "/admin/v1/spend", params=query, headers=auth) as r:
            assert r.status == 400
            body = await r.json()
        assert body["error"]["message"].startswith(param + ":"), body
    async with http.get(gateway.url + "/admin/v1/spend", headers={"x-api-key": gateway.key}) as r:
        assert r.status in (401, 403)


async def test_pending_rows_are_not_charges_and_a_second_publish_is_not_a_second(
    gateway: Gateway, http: aiohttp.ClientSession
) -> None:
    """Two rows of one request id as a republished request leaves them: the first publish's row
    never confirmed (pending, then undelivered), the second's confirmed. Usage and reports show
    one charge at every moment."""
    team, key_id, secret = await team_and_key(gateway, http)
    async with anthropic.AsyncAnthropic(base_url=gateway.url, api_key=secret) as claude:
        raw = await claude.messages.with_raw_response.create(
            model=MODEL, max_tokens=16, messages=[{"role": "user", "content": "x [sim:tokens=5]"}]
        )
    rid = raw.headers["request-id"]
    await settled(gateway, [rid])
    conn = await asyncpg.connect(gateway.database_url)
    try:
        # the first publish's row: stored, never confirmed (its holder died)
        columns = (
            "request_id, key_id, model, api, stream, deployment, region, status, input_tokens,"
            " cache_read_tokens, cache_write_5m_tokens, cache_write_1h_tokens, output_tokens,"
            " reasoning_tokens, estimated, cost_micros, prices"
        )
        await conn.execute(
            f"INSERT INTO usage_records (uid, received_at, {columns})"
            f" SELECT $1::text, received_at - interval '1 ms', {columns}"
            " FROM usage_records WHERE request_id = $2",
            uuid.uuid4().hex,
            rid,
        )
        await conn.execute(
            "UPDATE usage_records u SET awaiting_delivery = true, team_id = o.team_id,"
            " client = o.client FROM usage_records o WHERE u.request_id = $1"
            " AND o.request_id = $1 AND u.uid <> o.uid AND u.received_at < o.received_at",
            rid,
        )
        cost = await conn.fetchval(
            "SELECT cost_micros FROM usage_records WHERE request_id = $1 LIMIT 1", rid
        )
    finally:
        await conn.close()
    assert cost > 0
    async with http.get(gateway.url + "/api/usage", headers={"x-api-key": secret}) as r:
        page = await r.json()
    assert sorted(item["status"] for item in page["data"]) == ["complete", "pending"]
    totals = page["totals"]
    assert (totals["requests"], totals["cost_micros"]) == (1, cost)
    assert (totals["pending_requests"], totals["pending_cost_micros"]) == (1, cost)
    assert sum(d["cost_micros"] for d in page["by_day"]) == cost
    auth = {"authorization": f"Bearer {gateway.stack.operator_token}"}
    query = {
        "group_by": "team",
        "since": (datetime.datetime.now(datetime.UTC) - datetime.timedelta(hours=1)).isoformat(),
    }
    async with http.get(gateway.url + "/admin/v1/spend", params=query, headers=auth) as r:
        report = await r.json()
    mine = [d for d in report["data"] if d["team"] == team]
    assert [(d["requests"], d["cost_micros"]) for d in mine] == [(1, cost)]
    out = await asyncio.to_thread(ezat, gateway, "usage", "--key", key_id, "--json")
    listed: dict[str, Any] = json.loads(out.stdout)
    assert listed["totals"]["cost_micros"] == cost
    assert listed["totals"]["pending_requests"] == 1
