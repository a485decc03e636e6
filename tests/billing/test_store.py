"""The store against real PostgreSQL: idempotent batches and the usage listing."""

from __future__ import annotations

import asyncio
import datetime
import uuid
from importlib import resources

import asyncpg
import msgspec
import pytest
from ezat_billing import store
from ezat_billing.core.cursor import CURSOR_ERROR
from ezat_billing.core.query import QueryError
from ezat_billing.core.rows import UsageRow

from .factories import count_rows, row

DAY1 = datetime.datetime(2025, 6, 1, 10, 0, tzinfo=datetime.UTC).timestamp()
DAY2 = datetime.datetime(2025, 6, 2, 23, 30, tzinfo=datetime.UTC).timestamp()


async def test_batch_stores_every_column(pool: asyncpg.Pool, key_id: str) -> None:
    r = row(
        key_id=key_id,
        cache_read_tokens=7,
        cache_write_5m_tokens=8,
        cache_write_1h_tokens=9,
        reasoning_tokens=3,
        estimated=True,
        status="client_closed",
        error_type=None,
    )
    result = await store.insert_batch(pool, [r])
    assert result == {r.request_id: store.Stored(r.cost_micros, True)}
    got = await pool.fetchrow("SELECT * FROM usage_records WHERE request_id=$1", r.request_id)
    assert got["key_id"] == key_id and got["status"] == "client_closed"
    assert (got["cache_read_tokens"], got["cache_write_5m_tokens"]) == (7, 8)
    assert (got["cache_write_1h_tokens"], got["reasoning_tokens"]) == (9, 3)
    assert got["estimated"] is True and got["cost_micros"] == r.cost_micros
    assert got["received_at"] == r.received_at
    assert got["ttft_ms"] == pytest.approx(r.ttft_ms)
    assert '"cache_write_1h": 6000000' in got["prices"]


async def test_duplicate_keeps_the_first_cost(pool: asyncpg.Pool, key_id: str) -> None:
    first = row(key_id=key_id, input_tokens=1000)
    retry = row(key_id=key_id, request_id=first.request_id, input_tokens=999_999)
    assert retry.cost_micros != first.cost_micros
    await store.insert_batch(pool, [first])
    result = await store.insert_batch(pool, [retry])
    assert result[first.request_id] == store.Stored(first.cost_micros, False)
    assert await count_rows(pool, key_id) == 1


async def test_duplicates_inside_one_batch_store_one_row(pool: asyncpg.Pool, key_id: str) -> None:
    r = row(key_id=key_id)
    result = await store.insert_batch(pool, [r, r, r])
    assert result == {r.request_id: store.Stored(r.cost_micros, True)}
    assert await count_rows(pool, key_id) == 1


async def test_concurrent_transactions_with_the_same_ids_agree(
    pool: asyncpg.Pool, key_id: str
) -> None:
    rows = [row(key_id=key_id, input_tokens=100 * i) for i in range(1, 21)]
    results = await asyncio.gather(*(store.insert_batch(pool, rows) for _ in range(5)))
    for r in rows:
        costs = {res[r.request_id].cost_micros for res in results}
        assert costs == {r.cost_micros}
        assert sum(res[r.request_id].inserted for res in results) == 1
    assert await count_rows(pool, key_id) == 20


async def test_probe_reports_stored_rows_and_stores_nothing(
    pool: asyncpg.Pool, key_id: str
) -> None:
    stored, absent = row(key_id=key_id), row(key_id=key_id)
    await store.insert_batch(pool, [stored])
    assert await store.probe_stored(pool, [stored, absent]) == {
        stored.request_id: stored.cost_micros
    }
    assert await count_rows(pool, key_id) == 1


async def seed(pool: asyncpg.Pool, key_id: str) -> list[UsageRow]:
    """Five records over two days and two models, two of them at the very same instant."""
    rows = [
        row(key_id=key_id, request_id=f"{key_id}-a", received_at=DAY1, input_tokens=100),
        row(key_id=key_id, request_id=f"{key_id}-b", received_at=DAY1 + 60, output_tokens=10),
        row(
            key_id=key_id,
            request_id=f"{key_id}-c",
            received_at=DAY2,
            model="anthropic/claude-haiku-4-5",
            cache_read_tokens=1000,
        ),
        row(key_id=key_id, request_id=f"{key_id}-d", received_at=DAY2, reasoning_tokens=5),
        row(key_id=key_id, request_id=f"{key_id}-e", received_at=DAY2 + 1, status="failed"),
        row(key_id="someone-else", received_at=DAY2),
    ]
    # Settled (their delivery confirmed): a pending row is no charge (test_pending_totals).
    rows = [msgspec.structs.replace(r, awaiting_delivery=False) for r in rows]
    await store.insert_batch(pool, rows)
    return rows[:5]


async def test_pending_rows_show_as_pending_and_are_totalled_apart(
    pool: asyncpg.Pool, key_id: str
) -> None:
    settled = await seed(pool, key_id)
    pending = row(key_id=key_id, request_id=f"{key_id}-p", received_at=DAY2 + 2, output_tokens=7)
    assert pending.awaiting_delivery and pending.cost_micros > 0
    await store.insert_batch(pool, [pending])
    page = await store.query_usage(pool, key_id, None, None, None, 100, None)
    assert page.data[0].request_id == pending.request_id and page.data[0].status == "pending"
    assert page.totals.requests == 5
    assert page.totals.cost_micros == sum(r.cost_micros for r in settled)
    assert page.totals.pending_requests == 1
    assert page.totals.pending_cost_micros == pending.cost_micros
    assert sum(d.cost_micros for d in page.by_day) == page.totals.cost_micros


async def test_pages_walk_every_record_newest_first(pool: asyncpg.Pool, key_id: str) -> None:
    await seed(pool, key_id)
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        page = await store.query_usage(pool, key_id, None, None, None, 2, cursor)
        pages += 1
        seen += [item.request_id for item in page.data]
        assert page.totals.requests == 5  # totals cover the filter, not the page
        if not page.has_more:
            assert page.next_cursor is None
            break
        cursor = page.next_cursor
    assert pages == 3
    # Same instant (c, d): the request id breaks the tie, so none is skipped or repeated.
    assert seen == [f"{key_id}-{s}" for s in "edcba"]


async def test_totals_and_by_day(pool: asyncpg.Pool, key_id: str) -> None:
    rows = await seed(pool, key_id)
    page = await store.query_usage(pool, key_id, None, None, None, 100, None)
    t = page.totals
    assert t.requests == 5
    assert t.input_tokens == sum(r.input_tokens for r in rows)
    assert t.output_tokens == sum(r.output_tokens for r in rows)
    assert t.cache_read_tokens == 1000
    assert t.reasoning_tokens == 5
    assert t.cost_micros == sum(r.cost_micros for r in rows)
    assert t.cost_usd == pytest.approx(t.cost_micros / 1e6)
    assert rows[4].cost_micros == 0  # failed
    by_day = [(d.day, d.model, d.requests) for d in page.by_day]
    assert by_day == [
        ("2025-06-02", "anthropic/claude-haiku-4-5", 1),
        ("2025-06-02", "anthropic/claude-sonnet-5-5", 2),
        ("2025-06-01", "anthropic/claude-sonnet-5-5", 2),
    ]
    day1 = page.by_day[2]
    assert day1.cost_micros == rows[0].cost_micros + rows[1].cost_micros
    assert day1.input_tokens == rows[0].input_tokens + rows[1].input_tokens


async def test_filters_by_time_and_model(pool: asyncpg.Pool, key_id: str) -> None:
    await seed(pool, key_id)
    day2 = await store.query_usage(pool, key_id, DAY2, None, None, 100, None)
    assert [i.request_id for i in day2.data] == [f"{key_id}-{s}" for s in "edc"]
    day1 = await store.query_usage(pool, key_id, None, DAY2, None, 100, None)  # until: exclusive
    assert {i.request_id for i in day1.data} == {f"{key_id}-a", f"{key_id}-b"}
    haiku = await store.query_usage(pool, key_id, None, None, "anthropic/claude-haiku-4-5", 9, None)
    assert [i.request_id for i in haiku.data] == [f"{key_id}-c"]
    assert haiku.totals.requests == 1 and len(haiku.by_day) == 1


async def test_a_key_sees_only_its_own_records(pool: asyncpg.Pool, key_id: str) -> None:
    await seed(pool, key_id)
    page = await store.query_usage(pool, key_id, None, None, None, 100, None)
    assert all(i.request_id.startswith(key_id) for i in page.data)
    empty = await store.query_usage(pool, key_id + "-nobody", None, None, None, 100, None)
    assert empty.data == [] and empty.totals.requests == 0 and empty.totals.cost_micros == 0
    assert empty.has_more is False and empty.by_day == []


async def test_invalid_cursor_is_refused(pool: asyncpg.Pool, key_id: str) -> None:
    with pytest.raises(QueryError) as err:
        await store.query_usage(pool, key_id, None, None, None, 10, "bm9wZQ")
    assert str(err.value) == CURSOR_ERROR


async def test_a_write_whose_answer_is_lost_is_in_doubt(pool: asyncpg.Pool, key_id: str) -> None:
    r = row(key_id=key_id)
    async with pool.acquire() as blocker, blocker.transaction():
        await blocker.execute("LOCK TABLE usage_records IN EXCLUSIVE MODE")
        # The INSERT is sent and then times out: it might have run, so "nothing written" would
        # be a lie; the batcher must treat the row as in doubt.
        with pytest.raises(store.OutcomeUnknown):
            await store.insert_batch(pool, [r], timeout=0.2)
    assert await store.probe_stored(pool, [r]) == {}
    assert await count_rows(pool, key_id) == 0


async def test_probe_waits_for_a_write_still_in_flight(pool: asyncpg.Pool, key_id: str) -> None:
    r = row(key_id=key_id)
    async with pool.acquire() as other:
        await other.execute("BEGIN")
        await other.execute(
            "INSERT INTO usage_records (uid, request_id, key_id, model, api, stream, deployment,"
            " region, status, cost_micros, prices, received_at)"
            " VALUES ($1, $1, $2, 'm', 'messages', false, '', '', 'complete', 77, '{}', now())",
            r.request_id,
            key_id,
        )
        probe = asyncio.create_task(store.probe_stored(pool, [r], timeout=5))
        await asyncio.sleep(0.2)
        assert not probe.done()  # it cannot answer "absent" while the other write may commit
        await other.execute("COMMIT")
    assert await probe == {r.request_id: 77}


# ---- identity: the uid is the key, the request id is only shown --------------------------------


async def test_same_request_id_with_different_uids_is_two_rows(
    pool: asyncpg.Pool, key_id: str
) -> None:
    """A key reusing its x-request-id (or two tenants picking the same one) pays per request."""
    first = row(key_id=key_id, request_id="req-reused", uid=f"{key_id}-1", input_tokens=1000)
    second = row(key_id=key_id, request_id="req-reused", uid=f"{key_id}-2", input_tokens=3000)
    assert await store.insert_batch(pool, [first]) == {
        first.uid: store.Stored(first.cost_micros, True)
    }
    assert await store.insert_batch(pool, [second]) == {
        second.uid: store.Stored(second.cost_micros, True)
    }
    assert await count_rows(pool, key_id) == 2
    ids = await pool.fetch(
        "SELECT uid, request_id FROM usage_records WHERE key_id=$1 ORDER BY uid", key_id
    )
    assert [(r["uid"], r["request_id"]) for r in ids] == [
        (first.uid, "req-reused"),
        (second.uid, "req-reused"),
    ]


async def test_two_tenants_with_the_same_request_id_each_get_their_row(
    pool: asyncpg.Pool, key_id: str
) -> None:
    other_key = f"{key_id}-other"
    mine = row(key_id=key_id, request_id="req-collide", uid=f"{key_id}-u")
    theirs = row(key_id=other_key, request_id="req-collide", uid=f"{other_key}-u")
    result = await store.insert_batch(pool, [mine, theirs])  # even inside one batch
    assert {uid: s.inserted for uid, s in result.items()} == {mine.uid: True, theirs.uid: True}
    assert await count_rows(pool, key_id) == 1 and await count_rows(pool, other_key) == 1
    page = await store.query_usage(pool, key_id, None, None, None, 10, None)
    assert [i.request_id for i in page.data] == ["req-collide"]


async def test_same_uid_three_times_is_one_row_with_the_first_cost(
    pool: asyncpg.Pool, key_id: str
) -> None:
    first = row(key_id=key_id, uid=f"{key_id}-same", input_tokens=1000)
    retry = row(key_id=key_id, uid=first.uid, request_id=first.request_id, input_tokens=9_999)
    results = [await store.insert_batch(pool, [r]) for r in (first, retry, first)]
    assert [res[first.uid] for res in results] == [
        store.Stored(first.cost_micros, True),
        store.Stored(first.cost_micros, False),  # duplicate: looked up by uid
        store.Stored(first.cost_micros, False),
    ]
    assert await count_rows(pool, key_id) == 1
    probe = await store.probe_stored(pool, [retry])
    assert probe == {first.uid: first.cost_micros}


async def test_pages_walk_records_sharing_request_id_and_instant(
    pool: asyncpg.Pool, key_id: str
) -> None:
    rows = [
        row(key_id=key_id, request_id="req-dup", uid=f"{key_id}-{i}", received_at=DAY1)
        for i in "abc"
    ]
    await store.insert_batch(pool, rows)
    seen: list[str] = []
    cursor = None
    while True:
        page = await store.query_usage(pool, key_id, None, None, None, 1, cursor)
        seen += [item.request_id for item in page.data]
        if not page.has_more:
            break
        cursor = page.next_cursor
    assert seen == ["req-dup"] * 3  # the uid breaks the tie: none skipped, none repeated


async def test_migration_0002_moves_the_primary_key_to_uid(pool: asyncpg.Pool) -> None:
    """0001's table with a row, then 0002: the old row keeps its request id as its uid."""
    folder = resources.files("ezat_common") / "migrations"
    schema = f"m_{uuid.uuid4().hex[:10]}"
    async with pool.acquire() as conn:
        try:
            await conn.execute(f"CREATE SCHEMA {schema}; SET search_path TO {schema}")
            await conn.execute((folder / "0001_init.sql").read_text())
            await conn.execute(
                "INSERT INTO usage_records (request_id, key_id, model, api, stream, deployment,"
                " region, status, cost_micros, prices, received_at) VALUES ('old-req', 'k', 'm',"
                " 'messages', false, 'd', 'r', 'complete', 5, '{}', now())"
            )
            await conn.execute((folder / "0002_usage_uid.sql").read_text())
            got = await conn.fetchrow("SELECT uid, request_id FROM usage_records")
            assert (got["uid"], got["request_id"]) == ("old-req", "old-req")
            pkey = await conn.fetchval(
                "SELECT pg_get_constraintdef(oid) FROM pg_constraint"
                " WHERE conrelid = 'usage_records'::regclass AND contype = 'p'"
            )
            assert pkey == "PRIMARY KEY (uid)"
            # request_id is a plain column now (repeats allowed), still indexed
            await conn.execute(
                "INSERT INTO usage_records (uid, request_id, key_id, model, api, stream,"
                " deployment, region, status, cost_micros, prices, received_at) VALUES"
                " ('new-uid', 'old-req', 'k', 'm', 'messages', false, 'd', 'r', 'complete', 5,"
                " '{}', now())"
            )
            indexes = await conn.fetch(
                "SELECT indexdef FROM pg_indexes WHERE schemaname = $1", schema
            )
            assert any("(request_id)" in r["indexdef"] for r in indexes)
            with pytest.raises(asyncpg.NotNullViolationError):
                await conn.execute(
                    "INSERT INTO usage_records (request_id, key_id, model, api, stream,"
                    " deployment, region, status, cost_micros, prices, received_at) VALUES"
                    " ('x', 'k', 'm', 'messages', false, 'd', 'r', 'complete', 5, '{}', now())"
                )
        finally:
            await conn.execute(f"SET search_path TO DEFAULT; DROP SCHEMA {schema} CASCADE")


async def test_migration_0004_gives_old_rows_their_kind_and_no_server_tools(
    pool: asyncpg.Pool,
) -> None:
    """Rows stored before 0004 were served by Anthropic deployments (or by none); after it they
    say so, with 0 server-tool requests, and a row written without a kind has none."""
    folder = resources.files("ezat_common") / "migrations"
    schema = f"m_{uuid.uuid4().hex[:10]}"
    insert = (
        "INSERT INTO usage_records (uid, request_id, key_id, model, api, stream, deployment,"
        " region, status, cost_micros, prices, received_at) VALUES ($1, $1, 'k', 'm',"
        " 'messages', false, $2, 'r', 'complete', 5, '{}', now())"
    )
    async with pool.acquire() as conn:
        try:
            await conn.execute(f"CREATE SCHEMA {schema}; SET search_path TO {schema}")
            for name in ("0001_init.sql", "0002_usage_uid.sql", "0003_usage_delivery.sql"):
                await conn.execute((folder / name).read_text())
            await conn.execute(insert, "served", "sonnet-sim")
            await conn.execute(insert, "unserved", "")
            await conn.execute((folder / "0004_usage_kind_server_tools.sql").read_text())
            await conn.execute(insert, "new-without-kind", "sonnet-eu")
            got = await conn.fetch(
                "SELECT uid, deployment_kind, web_search_requests, web_fetch_requests"
                " FROM usage_records ORDER BY uid"
            )
            assert [tuple(r) for r in got] == [
                ("new-without-kind", "", 0, 0),
                ("served", "anthropic", 0, 0),
                ("unserved", "", 0, 0),
            ]
        finally:
            await conn.execute(f"SET search_path TO DEFAULT; DROP SCHEMA {schema} CASCADE")
