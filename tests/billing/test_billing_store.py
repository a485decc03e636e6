"""The store against real PostgreSQL: idempotent batches and the usage listing."""

from __future__ import annotations

import asyncio
import datetime

import asyncpg
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
    await store.insert_batch(pool, rows)
    return rows[:5]


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
            "INSERT INTO usage_records (request_id, key_id, model, api, stream, deployment,"
            " region, status, cost_micros, prices, received_at)"
            " VALUES ($1, $2, 'm', 'messages', false, '', '', 'complete', 77, '{}', now())",
            r.request_id,
            key_id,
        )
        probe = asyncio.create_task(store.probe_stored(pool, [r], timeout=5))
        await asyncio.sleep(0.2)
        assert not probe.done()  # it cannot answer "absent" while the other write may commit
        await other.execute("COMMIT")
    assert await probe == {r.request_id: 77}
