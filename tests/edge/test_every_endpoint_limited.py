"""Every endpoint a key calls counts against its rpm, and no tenant's traffic starves another's
authentication (docs/api.md, "Limits"): through a real edge (its ``serve()``) on the session's
NATS, PostgreSQL and Redis."""

from __future__ import annotations

import asyncio
import collections
import time
import uuid
from collections.abc import AsyncIterator

import aiohttp
import asyncpg
import pytest
from ezat_common import db

from .harness import RunningEdge, running_edge


@pytest.fixture(scope="module")
async def edge(nats_url: str, database_url: str, redis_url: str) -> AsyncIterator[RunningEdge]:
    async with running_edge(nats_url, database_url, redis_url) as running:
        yield running


async def key_with(database_url: str, rpm: int | None) -> str:
    conn = await asyncpg.connect(database_url)
    try:
        _, secret = await db.create_key(conn, f"limited-{uuid.uuid4().hex[:6]}", rpm=rpm)
    finally:
        await conn.close()
    return secret


async def within_one_window(seconds: float) -> None:
    """Wait, if need be, until the next ``seconds`` fall in one minute window of the limiter (a
    fixed window: a count that crosses its end starts again from zero)."""
    left = 60 - time.time() % 60
    if left < seconds:
        await asyncio.sleep(left + 0.1)


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/openai/v1/responses/resp_0123456789abcdef"),
        ("DELETE", "/openai/v1/responses/resp_0123456789abcdef"),
        ("GET", "/v1/models"),
        ("GET", "/openai/v1/models"),
        ("GET", "/api/usage"),
    ],
)
async def test_each_authenticated_endpoint_counts_against_the_keys_rpm(
    edge: RunningEdge, database_url: str, method: str, path: str
) -> None:
    secret = await key_with(database_url, rpm=2)
    await within_one_window(5)
    statuses = []
    async with aiohttp.ClientSession(headers={"x-api-key": secret}) as http:
        for _ in range(2):
            async with http.request(method, edge.url + path) as resp:
                statuses.append(resp.status)
        async with http.request(method, edge.url + path) as resp:
            body = await resp.json()
            assert resp.status == 429, (statuses, body)
            assert int(resp.headers["retry-after"]) >= 1
            assert resp.headers["x-ratelimit-limit-requests"] == "2"
            assert resp.headers["x-ratelimit-remaining-requests"] == "0"
            assert resp.headers["x-ratelimit-reset-requests"].endswith("s")
    assert 429 not in statuses and 500 not in statuses, statuses
    assert "2 requests per minute" in body["error"]["message"]


async def test_a_stored_response_flood_never_starves_another_tenants_authentication(
    edge: RunningEdge, database_url: str
) -> None:
    """Key A floods GET /openai/v1/responses/{id} (50 at a time) while its reads cannot finish:
    a lock on the table stands for reads that each take long (a long stored history, a slow
    disk), so that the stored-response connections are all held, on any machine. Tenant B's
    keys, each new to the edge (a database lookup), are served; A is refused past its rpm."""
    rpm = 24
    flooder = await key_with(database_url, rpm=rpm)
    tenants = [await key_with(database_url, rpm=None) for _ in range(4)]
    locker = await asyncpg.connect(database_url)
    lock = locker.transaction()
    await lock.start()
    await locker.execute("LOCK TABLE stored_responses IN ACCESS EXCLUSIVE MODE")
    await within_one_window(20)
    stop = asyncio.Event()
    a_statuses: collections.Counter[int] = collections.Counter()

    async def flood(http: aiohttp.ClientSession) -> None:
        while not stop.is_set():
            url = f"{edge.url}/openai/v1/responses/resp_{uuid.uuid4().hex}"
            async with http.get(url, headers={"x-api-key": flooder}) as resp:
                a_statuses[resp.status] += 1
            if resp.status == 429:
                await asyncio.sleep(0.05)  # refused at once: keep the flood from spinning

    connector = aiohttp.TCPConnector(limit=100)
    async with aiohttp.ClientSession(connector=connector) as http:
        workers = [asyncio.create_task(flood(http)) for _ in range(50)]
        try:
            # Until every connection the edge has for stored responses (8) waits on the lock
            # (a bound only so that a broken edge fails the test instead of hanging it).
            async with asyncio.timeout(15):
                while (
                    await locker.fetchval(
                        "SELECT count(*) FROM pg_locks"
                        " WHERE relation = 'stored_responses'::regclass AND NOT granted"
                    )
                    < 8
                ):
                    await asyncio.sleep(0.05)
            b_answers = []
            for secret in tenants:
                headers = {"authorization": f"Bearer {secret}"}
                async with http.get(f"{edge.url}/openai/v1/models", headers=headers) as resp:
                    b_answers.append((resp.status, await resp.text()))
        finally:
            stop.set()
            await lock.rollback()
            await locker.close()
            await asyncio.gather(*workers)
    assert all(status == 200 for status, _ in b_answers), b_answers
    assert a_statuses[429] > 0, a_statuses
    # Only the first rpm of A's requests reached the database; none failed inside the edge.
    assert sum(n for status, n in a_statuses.items() if status != 429) <= rpm, a_statuses
    assert 500 not in a_statuses, a_statuses
