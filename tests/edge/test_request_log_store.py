"""The request log's table (docs/observability.md, "Request log"): an edge's entries are stored
in one batch, survive a database that was away, and are pruned to ``[edge] request_log_days``
and ``[edge] request_log_rows``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import asyncpg
import pytest
from ezat_cli.infra import Infra, free_port
from ezat_edge import request_log
from ezat_edge.core.request_log import Entry
from support.databases import fresh_database


@pytest.fixture
def own_database(infra: Infra, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    url = asyncio.run(fresh_database(infra.database_url, "ezat_reqlog"))
    monkeypatch.setenv("DATABASE_URL", url)
    yield url


def answered(rid: str, age_days: float = 0.0, status: int = 200) -> Entry:
    e = Entry(
        at=time.time() - age_days * 86400, started=time.monotonic(), request_id=rid, api="messages"
    )
    e.ended(status, time.monotonic())
    return e


async def stored(url: str) -> list[str]:
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch("SELECT request_id FROM request_log ORDER BY id")
    finally:
        await conn.close()
    return [r["request_id"] for r in rows]


async def test_entries_are_stored_and_pruned_to_their_bounds(own_database: str) -> None:
    log = request_log.RequestLog(days=7, rows=3)
    for rid in ("old", "a", "b", "c", "d"):
        log.add(answered(rid, age_days=8 if rid == "old" else 0))
    await log.flush()  # stored, then pruned (the first flush prunes)
    try:
        assert await stored(own_database) == ["b", "c", "d"]
    finally:
        await log.stop()


async def test_entries_wait_for_a_database_that_is_away(
    own_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATABASE_URL", f"postgresql://postgres@127.0.0.1:{free_port()}/postgres")
    log = request_log.RequestLog(days=7, rows=100)
    log.add(answered("while-away", status=401))
    await log.flush()
    monkeypatch.setenv("DATABASE_URL", own_database)
    log.add(answered("after"))
    await log.flush()
    try:
        assert await stored(own_database) == ["while-away", "after"]
    finally:
        await log.stop()
