"""PostgreSQL stopped during load and started again: every completed request has its row, once.

The stack runs on a dedicated PostgreSQL (the session's one is shared by other tests). While it
is down, billing acknowledges through the JetStream outbox and drains it when it is back."""

from __future__ import annotations

import asyncio
import time

import asyncpg
import pytest

from .conftest import MODEL, BillingStack, Postgres, eventually

pytestmark = pytest.mark.timeout(150)


async def test_postgres_stopped_during_load_loses_no_record(
    pg_stack: BillingStack, postgres: Postgres
) -> None:
    client = pg_stack.anthropic()
    # Warm the edge's key cache: authentication also reads PostgreSQL.
    await client.messages.create(
        model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "hi [sim:tokens=2]"}]
    )
    results: list[tuple[str, bool]] = []
    stop_load = asyncio.Event()

    async def one(i: int) -> None:
        async with client.messages.stream(
            model=MODEL,
            max_tokens=100,
            messages=[{"role": "user", "content": f"p{i} [sim:tokens=10 token_ms=30]"}],
        ) as stream:
            rid = stream.response.headers["request-id"]
            done = False
            try:
                async for event in stream:
                    done = done or event.type == "message_stop"
            except Exception:
                done = False
            results.append((rid, done))

    async def load(worker: int) -> None:
        i = 0
        while not stop_load.is_set():
            await one(worker * 10_000 + i)
            i += 1

    workers = [asyncio.create_task(load(w)) for w in range(16)]
    await asyncio.sleep(1.5)
    before_outage = len(results)
    await asyncio.to_thread(postgres.stop)
    down_at = time.monotonic()
    with pytest.raises((OSError, asyncpg.PostgresError)):
        await asyncpg.connect(postgres.url, timeout=2)
    await asyncio.sleep(3.0)
    during_outage = len(results) - before_outage
    await asyncio.to_thread(postgres.start)
    outage = time.monotonic() - down_at
    await asyncio.sleep(1.5)
    stop_load.set()
    await asyncio.gather(*workers)

    completed = [rid for rid, done in results if done]
    assert during_outage > 10, "the load did not go on while PostgreSQL was down"

    async def all_rows() -> bool:
        rows = await pg_stack.fetch(
            "SELECT request_id FROM usage_records WHERE request_id = ANY($1::text[])", completed
        )
        return len(rows) == len(completed)

    await eventually(all_rows, timeout=30)
    ids = [rid for rid, _ in results]
    rows = await pg_stack.fetch(
        "SELECT request_id, status FROM usage_records WHERE request_id = ANY($1::text[])", ids
    )
    assert {r["request_id"] for r in rows} == set(completed)
    assert all(r["status"] == "complete" for r in rows)
    # Requests went on completing through the outage (the outbox acknowledged them).
    assert len(completed) >= len(results) - 2, f"outage {outage:.1f}s: {len(results)} requests"
    log_file = pg_stack.stack.data_dir / "logs" / "billing.log"

    async def drained_logged() -> bool:  # info lines reach the file within logs.FLUSH_AFTER
        return "stored" in log_file.read_text() and "from the outbox" in log_file.read_text()

    await eventually(drained_logged, timeout=5)
