"""A stack of its own for the authorization suite (docs/tenancy.md, "How a request is
authorized"): two edges on one stack, four models on one simulator, an auth cache TTL far longer
than any test, so that only the ``keys_changed`` / ``keys_revoked`` broadcasts (never the TTL)
can bring a change to an edge. Teams and keys are made in SQL here, and an admin change is an
UPDATE plus the broadcast the admin API sends (``tenancy.Changed``)."""

from __future__ import annotations

import asyncio
import datetime
import secrets
import time
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import anthropic
import asyncpg
import msgspec
import nats
import openai
import pytest
from ezat_cli.infra import Infra
from ezat_cli.stack import Stack
from ezat_common import db
from ezat_common.subjects import Subjects
from ezat_common.tenancy import Changed
from support.config import SONNET, base_url, deployment, listen, model, write_config
from support.stack import free_ports, running

PREFIX = "authz"
# Far past every test: an edge that applies a change did so because it heard it.
AUTH_CACHE_TTL = 600.0
MODELS = (SONNET, "anthropic/claude-instant-sim", "anthropic/claude-haiku-sim", "openai/gpt-sim")
ALIASES = {
    SONNET: ["claude-sonnet-5-5"],
    "anthropic/claude-instant-sim": ["claude-instant"],
    "anthropic/claude-haiku-sim": ["claude-haiku"],
    "openai/gpt-sim": ["gpt-sim"],
}


def authz_config(path: Path, edge_port: int, sim_port: int) -> Path:
    sim = base_url(sim_port)
    return write_config(
        path,
        edge={"listen": listen(edge_port), "ping_interval": 1.0, "auth_cache_ttl": AUTH_CACHE_TTL},
        router={"region": "local", "max_attempts": 2, "connect_timeout": 2.0},
        models=[
            model(m, aliases=ALIASES[m], max_output_tokens=8192, sampling=True) for m in MODELS
        ],
        simulators=[{"name": "authz-sim", "listen": listen(sim_port)}],
        deployments=[
            deployment(f"d{i}", m, sim, upstream_model="claude-sonnet-5-5")
            for i, m in enumerate(MODELS)
        ],
    )


class Authz:
    """The two edges' addresses and what the tests do as an operator would."""

    def __init__(self, stack: Stack, urls: tuple[str, str], database_url: str) -> None:
        self.stack = stack
        self.urls = urls
        self.database_url = database_url
        self.subjects = Subjects(prefix=PREFIX)

    def anthropic(self, secret: str, edge: int = 0) -> anthropic.AsyncAnthropic:
        return anthropic.AsyncAnthropic(base_url=self.urls[edge], api_key=secret, max_retries=0)

    def openai(self, secret: str, edge: int = 0) -> openai.AsyncOpenAI:
        url = self.urls[edge] + "/openai/v1"
        return openai.AsyncOpenAI(base_url=url, api_key=secret, max_retries=0)

    async def sql(self, query: str, *args: Any) -> str:
        conn = await asyncpg.connect(self.database_url)
        try:
            return str(await conn.execute(query, *args))
        finally:
            await conn.close()

    async def team(
        self, models: Sequence[str] | None = None, rpm: int | None = None, tpm: int | None = None
    ) -> str:
        team_id = "team_" + secrets.token_hex(6)
        await self.sql(
            "INSERT INTO teams (id, name, models, rpm, tpm) VALUES ($1, $2, $3, $4, $5)",
            team_id,
            "t-" + team_id,
            None if models is None else list(models),
            rpm,
            tpm,
        )
        return team_id

    async def key(
        self,
        *,
        team: str | None = None,
        models: Sequence[str] | None = None,
        expires_at: datetime.datetime | None = None,
        **limits: Any,
    ) -> tuple[str, str]:
        """A new key's id and secret."""
        conn = await asyncpg.connect(self.database_url)
        try:
            key, secret = await db.create_key(
                conn,
                "authz",
                team_id=team,
                models=None if models is None else list(models),
                expires_at=expires_at,
                **limits,
            )
        finally:
            await conn.close()
        return key.id, secret

    async def changed(self, *, key: str | None = None, team: str | None = None) -> None:
        """What the admin API broadcasts after a write."""
        await self._publish(
            self.subjects.keys_changed, msgspec.json.encode(Changed(key=key, team=team))
        )

    async def revoked(self, key_id: str) -> None:
        await self.sql("UPDATE api_keys SET revoked_at = now() WHERE id = $1", key_id)
        await self._publish(self.subjects.keys_revoked, key_id.encode())

    async def _publish(self, subject: str, data: bytes) -> None:
        assert self.stack.infra is not None
        nc = await nats.connect(self.stack.infra.nats_url)
        try:
            await nc.publish(subject, data)
            await nc.flush()
        finally:
            await nc.close()


async def eventually(check: Any, within: float = 5.0) -> float:
    """Seconds until ``check()`` (async) returned True, failing after ``within`` seconds."""
    started = time.monotonic()
    while True:
        if await check():
            return time.monotonic() - started
        if time.monotonic() - started > within:
            raise AssertionError(f"not within {within} s")
        await asyncio.sleep(0.05)


def _wait_ready(url: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/readyz", timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"the second edge at {url} was not ready")


@pytest.fixture(scope="session")
def authz(infra: Infra, database_url: str, data_dir: Path) -> Iterator[Authz]:
    folder = data_dir / "authz-stack"
    ports = free_ports("edge", "edge2", "sim")
    config = authz_config(folder / "ezat-authz.toml", ports["edge"], ports["sim"])
    config2 = authz_config(folder / "ezat-authz-2.toml", ports["edge2"], ports["sim"])

    def add_edge(stack: Stack) -> None:
        stack.add_service("edge-2", "edge", {"EZAT_CONFIG": str(config2.resolve())})
        _wait_ready(base_url(ports["edge2"]))

    stack_infra = Infra(infra.nats_url, database_url, infra.redis_url)
    with running(config, stack_infra, PREFIX, then=add_edge) as stack:
        yield Authz(stack, (base_url(ports["edge"]), base_url(ports["edge2"])), database_url)
