"""The request log's table (docs/observability.md, "Request log"): an edge's entries are stored
in one batch, survive a database that was away, and are pruned to ``[edge] request_log_days``
and ``[edge] request_log_rows``."""

from __future__ import annotations

import asyncio
import json
import logging
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


async def test_rows_are_stored_at_most_every_interval_and_at_shutdown(
    own_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A COPY costs the edge the same whatever its size: rows wait for ``STORE_INTERVAL`` since
    the last batch stored (the lines do not), and what waits is stored when the edge stops."""
    monkeypatch.setattr(request_log, "STORE_INTERVAL", 3600.0)
    log = request_log.RequestLog(days=7, rows=100)
    log.add(answered("first"))
    await log.flush()  # nothing stored yet: stored at once
    log.add(answered("second"))
    await log.flush()
    try:
        assert await stored(own_database) == ["first"]
    finally:
        await log.stop()
    assert await stored(own_database) == ["first", "second"]


def keyed(rid: str, status: int = 200) -> Entry:
    e = answered(rid, status=status)
    e.key_id = "key_0123456789abcdef"
    return e


async def test_entries_without_a_key_cannot_push_real_ones_out(
    own_database: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A flood of 401s (no key, request ids of the client's choosing): each has its line, at most
    ``anonymous_per_second`` are stored, and pruning keeps only the newest ``anonymous_rows`` of
    them before the row bound counts the entries with a key."""
    log = request_log.RequestLog(days=7, rows=10, anonymous_rows=3, anonymous_per_second=8)
    for i in range(5):
        log.add(keyed(f"real-{i}"))
    for i in range(40):
        log.add(answered(f"flood-{i}", status=401))
    with caplog.at_level(logging.INFO, logger="ezat.edge.requests"):
        await log.flush()  # stored, then pruned (the first flush prunes)
    try:
        records = [r for r in caplog.records if r.name == "ezat.edge.requests"]
        lines = [json.loads(line) for r in records for line in r.json_lines.splitlines()]
        # every request has its line (a flush's lines are one record: ezat_common.logs)
        assert [line["request_id"] for line in lines] == [f"real-{i}" for i in range(5)] + [
            f"flood-{i}" for i in range(40)
        ]
        assert await stored(own_database) == [f"real-{i}" for i in range(5)] + [
            "flood-5",
            "flood-6",
            "flood-7",
        ]
        assert "32 entries without a key not stored" in caplog.text
    finally:
        await log.stop()
