"""Usage rows as the e2e tests of the real clients read them back."""

from __future__ import annotations

import asyncio

import asyncpg


async def fetched(
    database_url: str, sql: str, *args: object, at_least: int
) -> list[asyncpg.Record]:
    """The rows ``sql`` selects, once there are ``at_least`` of them (billing drains the outbox
    into PostgreSQL within milliseconds; after 5 s, the rows there are)."""
    conn = await asyncpg.connect(database_url)
    try:
        for _ in range(100):
            rows = await conn.fetch(sql, *args)
            if len(rows) >= at_least:
                break
            await asyncio.sleep(0.05)
    finally:
        await conn.close()
    return list(rows)
