"""A whole stack of the billing end-to-end tests: its own config (explicit prices of every kind)
and its own processes on the session's NATS/PostgreSQL/Redis; ``pg_stack`` runs one more stack
on a dedicated PostgreSQL that a test can stop and restart."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import anthropic
import asyncpg
import pytest
from ezat_cli.infra import Infra, free_port, start_postgres
from ezat_cli.stack import Stack
from ezat_common import db

CONFIG = """
[edge]
listen = "127.0.0.1:{edge}"
ping_interval = 1.0
auth_cache_ttl = 600.0

[router]
region = "local"
max_attempts = 2
connect_timeout = 2.0
first_byte_timeout = 30.0
between_events_timeout = 10.0

[[models]]
id = "anthropic/claude-sonnet-5-5"
aliases = ["claude-sonnet-5-5"]
context_window = 200000
max_output_tokens = 64000
prompt_caching = true
thinking = "adaptive"
effort_levels = ["low", "medium", "high"]
min_cache_tokens = 1024
{price}

[[simulators]]
name = "bill-sim"
listen = "127.0.0.1:{sim}"

[[deployments]]
name = "sonnet-sim"
model = "anthropic/claude-sonnet-5-5"
base_url = "http://127.0.0.1:{sim}"
upstream_model = "claude-sonnet-5-5"
api_key = "sim-key"
region = "local"
"""

PRICE_LINE = (
    "price = { input = 3.0, output = 15.0, cache_write_5m = 3.75, cache_write_1h = 6.0,"
    " cache_read = 0.30 }"
)
MODEL = "claude-sonnet-5-5"
# USD per million tokens of CONFIG = micro-dollars per token.
PRICES = {"input": 3.0, "output": 15.0, "cw5": 3.75, "cw1": 6.0, "read": 0.30}


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
        return anthropic.AsyncAnthropic(base_url=self.url, api_key=key or self.key, **kw)

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
        async with (
            aiohttp.ClientSession() as s,
            s.get(f"{self.sim}/_sim/requests?limit={limit}") as r,
        ):
            data: list[dict[str, Any]] = await r.json()
            return data


def _start(folder: Path, infra: Infra) -> tuple[Stack, dict[str, int]]:
    folder.mkdir(parents=True, exist_ok=True)
    ports = {"edge": free_port(), "sim": free_port()}
    path = folder / "ezat-billing.toml"
    path.write_text(CONFIG.format(price=PRICE_LINE, **ports))
    # A prefix of its own: other stacks on the session's NATS must not hear it (nor drain its
    # outbox stream into their database).
    prefix = {"EZAT_SUBJECT_PREFIX": f"bill{ports['edge']}"}
    stack = Stack(config_path=path, data_dir=folder, infra=infra, extra_env=prefix)
    try:
        stack.start(timeout=90)
    except BaseException:
        stack.stop()
        raise
    stack.supervise_in_background()
    return stack, ports


def _key(database_url: str) -> str:
    async def make() -> str:
        conn = await asyncpg.connect(database_url)
        try:
            _, secret = await db.create_key(conn, "billing-e2e")
        finally:
            await conn.close()
        return secret

    return asyncio.run(make())


@pytest.fixture(scope="module")
def billing_stack(infra: Infra, database_url: str, data_dir: Path) -> Iterator[BillingStack]:
    folder = data_dir / f"billing-stack-{free_port()}"
    # Infra without processes of its own: stopping the stack leaves the session's servers up.
    stack, ports = _start(folder, Infra(infra.nats_url, database_url, infra.redis_url))
    try:
        yield BillingStack(
            stack,
            f"http://127.0.0.1:{ports['edge']}",
            f"http://127.0.0.1:{ports['sim']}",
            database_url,
            _key(database_url),
        )
    finally:
        stack.stop()


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
    stack, ports = _start(folder, Infra(infra.nats_url, postgres.url, infra.redis_url))
    try:
        yield BillingStack(
            stack,
            f"http://127.0.0.1:{ports['edge']}",
            f"http://127.0.0.1:{ports['sim']}",
            postgres.url,
            _key(postgres.url),
        )
    finally:
        stack.stop()


Poll = Callable[[], Awaitable[bool]]


async def eventually(check: Poll, timeout: float = 15.0, every: float = 0.2) -> None:
    end = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > end:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(every)
