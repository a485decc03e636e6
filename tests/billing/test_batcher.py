"""Group commit: durable acknowledgements, batching, deadlines, and rows that must never land."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Sequence

import asyncpg
import pytest
from ezat_billing import store
from ezat_billing.batcher import Batcher, BatcherStopped, DeadlineExceeded
from ezat_billing.core.rows import UsageRow
from ezat_billing.store import OutcomeUnknown, Stored
from ezat_cli.infra import free_port

from .factories import count_rows, row


def real_batcher(pool: asyncpg.Pool, **kwargs: float) -> Batcher:
    batcher = Batcher(
        functools.partial(store.insert_batch, pool, timeout=2.0),
        functools.partial(store.probe_stored, pool, timeout=2.0),
        **kwargs,  # type: ignore[arg-type]
    )
    batcher.start()
    return batcher


async def test_same_record_three_times_one_row_one_cost(pool: asyncpg.Pool, key_id: str) -> None:
    batcher = real_batcher(pool)
    try:
        r = row(key_id=key_id)
        one = await batcher.submit(r)
        concurrent = await asyncio.gather(batcher.submit(r), batcher.submit(r))
        again = await batcher.submit(r)
    finally:
        await batcher.stop()
    assert one == Stored(r.cost_micros, True)
    assert [c.cost_micros for c in (*concurrent, again)] == [r.cost_micros] * 3
    assert await count_rows(pool, key_id) == 1


async def test_200_concurrent_records_share_few_transactions(
    pool: asyncpg.Pool, key_id: str
) -> None:
    batcher = real_batcher(pool)
    try:
        rows = [row(key_id=key_id, input_tokens=i) for i in range(200)]
        results = await asyncio.gather(*(batcher.submit(r) for r in rows))
    finally:
        await batcher.stop()
    assert [res.cost_micros for res in results] == [r.cost_micros for r in rows]
    assert await count_rows(pool, key_id) == 200
    assert batcher.batches < 200
    assert batcher.batches <= 10  # the first transaction is in flight while the rest queue up


class SwitchableWriter:
    """Writes through a dead pool until told to use the live one (PostgreSQL coming back)."""

    def __init__(self, dead: asyncpg.Pool, live: asyncpg.Pool) -> None:
        self.pool = dead
        self.live = live
        self.written: list[str] = []

    async def write(self, rows: Sequence[UsageRow]) -> dict[str, Stored]:
        result = await store.insert_batch(self.pool, rows, timeout=0.5)
        self.written += [r.request_id for r in rows]
        return result

    async def probe(self, rows: Sequence[UsageRow]) -> dict[str, int]:
        return await store.probe_stored(self.pool, rows, timeout=0.5)


async def test_expired_waiter_fails_and_its_row_is_never_written(
    pool: asyncpg.Pool, key_id: str
) -> None:
    # Nothing listens on this port: every connection attempt is refused at once.
    dead = await asyncpg.create_pool(f"postgresql://postgres@127.0.0.1:{free_port()}/x", min_size=0)
    writer = SwitchableWriter(dead, pool)
    batcher = Batcher(writer.write, writer.probe, deadline=0.3, backoff=0.02, max_backoff=0.05)
    batcher.start()
    try:
        lost = row(key_id=key_id)
        started = time.monotonic()
        with pytest.raises(DeadlineExceeded):
            await batcher.submit(lost)
        assert 0.25 < time.monotonic() - started < 1.0
        assert batcher.attempts >= 2  # it kept retrying until the deadline
        writer.pool = pool  # PostgreSQL is back
        kept = row(key_id=key_id)
        assert (await batcher.submit(kept)).cost_micros == kept.cost_micros
        await asyncio.sleep(0.1)  # give a wrongly kept row every chance to be written
    finally:
        await batcher.stop()
        await dead.close()
    assert writer.written == [kept.request_id]
    ids = {r["request_id"] for r in await pool.fetch("SELECT request_id FROM usage_records")}
    assert kept.request_id in ids and lost.request_id not in ids


async def test_row_in_flight_at_its_deadline_gets_the_true_outcome() -> None:
    release = asyncio.Event()

    async def slow_write(rows: Sequence[UsageRow]) -> dict[str, Stored]:
        await release.wait()  # the transaction commits only after the waiter's deadline
        return {r.request_id: Stored(r.cost_micros, True) for r in rows}

    async def no_probe(rows: Sequence[UsageRow]) -> dict[str, int]:
        raise AssertionError("nothing is in doubt")

    batcher = Batcher(slow_write, no_probe, deadline=0.1)
    batcher.start()
    r = row()
    try:
        pending = asyncio.create_task(batcher.submit(r))
        await asyncio.sleep(0.3)
        assert not pending.done()  # past its deadline, but its transaction may still commit
        release.set()
        assert await pending == Stored(r.cost_micros, True)
    finally:
        await batcher.stop()


@pytest.mark.parametrize("stored", [True, False])
async def test_row_in_doubt_after_its_deadline_is_probed_not_written(stored: bool) -> None:
    writes: list[list[str]] = []

    async def commit_lost(rows: Sequence[UsageRow]) -> dict[str, Stored]:
        writes.append([r.request_id for r in rows])
        await asyncio.sleep(0.15)  # longer than the deadline
        raise OutcomeUnknown("connection lost during COMMIT")

    async def probe(rows: Sequence[UsageRow]) -> dict[str, int]:
        return {r.request_id: 42 for r in rows} if stored else {}

    batcher = Batcher(commit_lost, probe, deadline=0.1, backoff=0.01)
    batcher.start()
    r = row()
    try:
        if stored:
            assert await batcher.submit(r) == Stored(42, False)
        else:
            with pytest.raises(DeadlineExceeded):
                await batcher.submit(r)
    finally:
        await batcher.stop()
    assert writes == [[r.request_id]]  # never inserted again once out of time


async def test_write_failure_before_deadline_is_retried() -> None:
    calls = 0

    async def flaky(rows: Sequence[UsageRow]) -> dict[str, Stored]:
        nonlocal calls
        calls += 1
        if calls < 3:
            raise ConnectionRefusedError("postgres restarting")
        return {r.request_id: Stored(r.cost_micros, True) for r in rows}

    async def no_probe(rows: Sequence[UsageRow]) -> dict[str, int]:
        return {}

    batcher = Batcher(flaky, no_probe, deadline=2.0, backoff=0.01)
    batcher.start()
    try:
        r = row()
        assert (await batcher.submit(r)).cost_micros == r.cost_micros
    finally:
        await batcher.stop()
    assert calls == 3


async def test_stopped_batcher_refuses_new_records(pool: asyncpg.Pool) -> None:
    batcher = real_batcher(pool)
    await batcher.stop()
    with pytest.raises(BatcherStopped):
        await batcher.submit(row())


async def test_stop_answers_a_write_that_never_returns() -> None:
    async def hung(rows: Sequence[UsageRow]) -> dict[str, Stored]:
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")

    async def no_probe(rows: Sequence[UsageRow]) -> dict[str, int]:
        return {}

    batcher = Batcher(hung, no_probe, deadline=0.05)
    batcher.start()
    pending = asyncio.create_task(batcher.submit(row()))
    await asyncio.sleep(0.1)
    await batcher.stop(timeout=0.1)
    with pytest.raises(BatcherStopped, match="unconfirmed"):
        await asyncio.wait_for(pending, 1)
