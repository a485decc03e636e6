"""A whole stack of the billing end-to-end tests: its own config (explicit prices of every kind)
and its own processes on the session's NATS/PostgreSQL/Redis; ``pg_stack`` runs one more stack
on a dedicated PostgreSQL that a test can stop and restart."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import asyncpg
import pytest
from ezat_cli.infra import Infra, free_port, start_postgres
from ezat_cli.stack import Stack
from ezat_common import db
from support import sims
from support.clients import track
from support.config import SONNET, base_url, listen, model, one_simulator, write_config
from support.stack import key, running

MODEL = "claude-sonnet-5-5"
# USD per million tokens, every kind priced explicitly = micro-dollars per token.
PRICE = {
    "input": 3.0,
    "output": 15.0,
    "cache_write_5m": 3.75,
    "cache_write_1h": 6.0,
    "cache_read": 0.30,
}
# The same prices under the names the tests use.
PRICES = dict(zip(("input", "output", "cw5", "cw1", "read"), PRICE.values(), strict=True))


def billing_config(path: Path, edge: int, sim: int) -> Path:
    sections = one_simulator(
        edge,
        sim,
        edge={"auth_cache_ttl": 600.0},
        router={"first_byte_timeout": 30.0},
        models=[
            model(
                SONNET,
                aliases=[MODEL],
                prompt_caching=True,
                thinking="adaptive",
                effort_levels=["low", "medium", "high"],
                min_cache_tokens=1024,
                price=PRICE,
            )
        ],
        simulators=[{"name": "bill-sim", "listen": listen(sim)}],
    )
    return write_config(path, **sections)


@dataclass
class BillingStack:
    stack: Stack
    url: str
    sim: str
    database_url: str
    key: str

    def anthropic(self, key: str | None = None, **kw: Any) -> anthropic.AsyncAnthropic:
        kw.setdefault("max_retries", 0)
        kw.setdefault("timeout", 60.0)
        return track(anthropic.AsyncAnthropic(base_url=self.url, api_key=key or self.key, **kw))

    async def new_key(self, name: str = "extra", **kw: Any) -> tuple[str, str]:
        conn = await asyncpg.connect(self.database_url)
        try:
            key, secret = await db.create_key(conn, name, **kw)
        finally:
            await conn.close()
        return key.id, secret

    async def fetch(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        conn = await asyncpg.connect(self.database_url)
        try:
            return list(await conn.fetch(sql, *args))
        finally:
            await conn.close()

    async def row(self, request_id: str, wait: float = 10.0) -> asyncpg.Record:
        """The usage row of ``request_id``, waiting for it (outbox drains come a little later)."""
        end = time.monotonic() + wait
        while True:
            rows = await self.fetch("SELECT * FROM usage_records WHERE request_id=$1", request_id)
            if rows:
                return rows[0]
            if time.monotonic() > end:
                raise AssertionError(f"no usage row for {request_id} after {wait}s")
            await asyncio.sleep(0.1)

    async def sim_requests(self, limit: int = 500) -> list[dict[str, Any]]:
        return await sims.requests(self.sim, limit)


@contextmanager
def _running(folder: Path, infra: Infra) -> Iterator[BillingStack]:
    edge, sim = free_port(), free_port()
    config = billing_config(folder / "ezat-billing.toml", edge, sim)
    # A prefix of its own: other stacks on the session's NATS must not hear it (nor drain its
    # outbox stream into their database).
    with running(config, infra, f"bill{edge}") as stack:
        secret = key(infra.database_url, "billing-e2e")
        yield BillingStack(stack, base_url(edge), base_url(sim), infra.database_url, secret)


@pytest.fixture(scope="module")
def billing_stack(infra: Infra, database_url: str, data_dir: Path) -> Iterator[BillingStack]:
    folder = data_dir / f"billing-stack-{free_port()}"
    # Infra without processes of its own: stopping the stack leaves the session's servers up.
    with _running(folder, Infra(infra.nats_url, database_url, infra.redis_url)) as stack:
        yield stack


@dataclass
class Postgres:
    """A dedicated embedded PostgreSQL that a test may stop and start again."""

    url: str
    server: Any

    def stop(self) -> None:
        from pgserver._commands import pg_ctl

        pg_ctl(
            ["-w", "-m", "fast", "stop"], pgdata=self.server.pgdata, user=self.server.system_user
        )

    def start(self) -> None:
        self.server.ensure_postgres_running()


@pytest.fixture(scope="module")
def postgres(data_dir: Path) -> Iterator[Postgres]:
    folder = data_dir / f"pg-{free_port()}"
    folder.mkdir()
    url, server = start_postgres(folder)
    try:
        yield Postgres(url, server)
    finally:
        server.cleanup()


@pytest.fixture(scope="module")
def pg_stack(infra: Infra, postgres: Postgres, data_dir: Path) -> Iterator[BillingStack]:
    folder = data_dir / f"pg-stack-{free_port()}"
    with _running(folder, Infra(infra.nats_url, postgres.url, infra.redis_url)) as stack:
        yield stack


Poll = Callable[[], Awaitable[bool]]


async def eventually(check: Poll, timeout: float = 15.0, every: float = 0.2) -> None:
    end = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > end:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(every)
