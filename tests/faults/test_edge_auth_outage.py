"""Authentication while PostgreSQL is down (docs/reliability.md, "Authentication during a
database outage"): known keys keep working past the cache TTL, a revocation broadcast still
applies, unknown keys get 503 with retry-after, and the edge reconnects when the database is back.
A database that is there but answers nothing (frozen) holds no request longer than the lookup
timeout.

The edge runs in this process (its real ``serve()``) on a PostgreSQL of this module's own, which
the test stops and starts; the clients are the official SDK.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anthropic
import asyncpg
import pytest
from edge.harness import RunningEdge, new_key, running_edge
from ezat_cli.infra import free_port, start_postgres
from ezat_common import db
from ezat_edge.auth import LOOKUP_TIMEOUT
from support.clients import track

from .freeze import freeze

pytestmark = pytest.mark.timeout(120)
TTL = 0.5


class Postgres:
    def __init__(self, url: str, server: Any) -> None:
        self.url = url
        self.server = server

    def stop(self) -> None:
        from pgserver._commands import pg_ctl

        pg_ctl(
            ["-w", "-m", "fast", "stop"], pgdata=self.server.pgdata, user=self.server.system_user
        )

    def start(self) -> None:
        self.server.ensure_postgres_running()

    @property
    def pid(self) -> int:
        return int(self.server.get_pid())


@pytest.fixture(scope="module")
def postgres(data_dir: Path) -> Iterator[Postgres]:
    folder = data_dir / f"auth-pg-{free_port()}"
    folder.mkdir()
    url, server = start_postgres(folder)

    async def migrate() -> None:
        conn = await asyncpg.connect(url)
        try:
            await db.migrate(conn)
        finally:
            await conn.close()

    asyncio.run(migrate())
    try:
        yield Postgres(url, server)
    finally:
        server.cleanup()


@pytest.fixture
async def edge(nats_url: str, redis_url: str, postgres: Postgres) -> AsyncIterator[RunningEdge]:
    async with running_edge(nats_url, postgres.url, redis_url, auth_cache_ttl=TTL) as running:
        yield running


def client(edge: RunningEdge, key: str) -> anthropic.AsyncAnthropic:
    return track(
        anthropic.AsyncAnthropic(base_url=edge.url, api_key=key, max_retries=0, timeout=10)
    )


async def test_known_keys_outlive_a_database_outage_and_unknown_ones_wait(
    edge: RunningEdge, postgres: Postgres
) -> None:
    known = client(edge, edge.key)
    revoked_id, revoked_secret = await new_key(postgres.url, "to-revoke")
    revoked = client(edge, revoked_secret)
    _, unknown_secret = await new_key(postgres.url, "never-seen")
    unknown = client(edge, unknown_secret)
    await known.models.list()
    await revoked.models.list()

    await asyncio.to_thread(postgres.stop)
    try:
        # Well past the TTL (and past the 4.5 s after which every request used to fail).
        until = time.monotonic() + 6.0
        served = 0
        while time.monotonic() < until:
            await known.models.list()
            served += 1
            await asyncio.sleep(0.1)
        assert served > 20
        with pytest.raises(anthropic.APIStatusError) as waited:
            await unknown.models.list()
        assert waited.value.status_code == 503
        assert waited.value.response.headers["retry-after"]
        # A revocation broadcast applies during the outage too: served stale, it is revoked.
        await edge.nc.publish(edge.subjects.keys_revoked, revoked_id.encode())
        await edge.nc.flush()
        await asyncio.sleep(0.2)
        await asyncio.sleep(TTL)
        with pytest.raises(anthropic.AuthenticationError):
            await revoked.models.list()
        await known.models.list()
    finally:
        await asyncio.to_thread(postgres.start)

    # Back: the edge reconnects by itself, unknown keys are looked up again...
    deadline = time.monotonic() + 15
    while True:
        try:
            await unknown.models.list()
            break
        except anthropic.APIStatusError as exc:
            assert exc.status_code == 503
            assert time.monotonic() < deadline, "the edge did not reconnect to PostgreSQL"
            await asyncio.sleep(0.2)
    # ...and known keys are checked against the database again once their entry expires.
    conn = await asyncpg.connect(postgres.url)
    try:
        await db.revoke_key(conn, edge.key_id)  # no broadcast: only the TTL can find it
    finally:
        await conn.close()
    await asyncio.sleep(TTL + 1.1)  # the TTL, and the second the edge waits after a failure
    with pytest.raises(anthropic.AuthenticationError):
        await known.models.list()


async def test_a_frozen_database_holds_no_request_past_the_lookup_timeout(
    edge: RunningEdge, postgres: Postgres
) -> None:
    """Before, the first lookup after the freeze waited in asyncpg's release of its cancelled
    query (shielded from the timeout) for as long as the database was frozen."""
    known = client(edge, edge.key)
    _, unknown_secret = await new_key(postgres.url, "never-seen-frozen")
    unknown = client(edge, unknown_secret)
    await known.models.list()  # cached, and the edge's pool holds an open connection

    async def timed(call: Any) -> float:
        start = time.monotonic()
        try:
            await call()
        except anthropic.APIStatusError as exc:
            assert exc.status_code == 503 and exc.response.headers["retry-after"]
        return time.monotonic() - start

    async def requests() -> list[float]:
        await asyncio.sleep(TTL + 0.2)  # the known key's entry expired: it asks the database
        seconds = []
        for _ in range(10):
            calls = [known.models.list] * 4 + [unknown.models.list]
            seconds += await asyncio.gather(*(timed(c) for c in calls))
            await asyncio.sleep(0.3)
        return seconds

    freezing = asyncio.create_task(freeze(postgres.pid, 8.0))
    try:
        seconds = await requests()
    finally:
        await freezing
    print(f"frozen: {len(seconds)} requests, slowest {max(seconds):.2f}s")
    assert max(seconds) <= LOOKUP_TIMEOUT + 1.0, sorted(seconds)[-5:]
    await known.models.list()
