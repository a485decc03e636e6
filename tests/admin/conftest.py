"""A stack of the admin API tests (docs/tenancy.md, "Admin API reference"): the five services
and a simulator on a database of their own (a test tampers with the audit log), with a short
auth cache so that a rotated-out secret's end is seen within seconds."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import anthropic
import pytest
from ezat_cli.infra import Infra, free_port
from support.config import SONNET, listen, model, one_simulator, write_config
from support.databases import fresh_database
from support.stack import key, running

INSTANT = "anthropic/claude-instant-sim"
AUTH_CACHE_TTL = 1.0


@dataclass
class AdminStack:
    url: str
    token: str
    database_url: str
    api_key: str  # an ordinary API key, made directly in the database

    def anthropic(self, secret: str) -> anthropic.AsyncAnthropic:
        return anthropic.AsyncAnthropic(base_url=self.url, api_key=secret, max_retries=0)


@pytest.fixture(scope="session")
def admin_stack(infra: Infra, data_dir: Path) -> Iterator[AdminStack]:
    database_url = asyncio.run(fresh_database(infra.database_url, "ezat_admin"))
    edge, sim = free_port(), free_port()
    sections = one_simulator(
        edge,
        sim,
        edge={"auth_cache_ttl": AUTH_CACHE_TTL},
        models=[
            model(SONNET, aliases=["claude-sonnet-5-5"]),
            model(INSTANT, aliases=["claude-instant"], price={"input": 0.8, "output": 4.0}),
        ],
        simulators=[{"name": "admin-sim", "listen": listen(sim)}],
    )
    config = write_config(data_dir / "admin" / "ezat.toml", **sections)
    stack_infra = Infra(infra.nats_url, database_url, infra.redis_url)
    with running(config, stack_infra, "adm") as stack:
        yield AdminStack(
            f"http://127.0.0.1:{edge}",
            stack.operator_token,
            database_url,
            key(database_url, "plain"),
        )


class Admin:
    """The admin API as the operator calls it: ``call`` returns (status, JSON body)."""

    def __init__(self, http: aiohttp.ClientSession, stack: AdminStack) -> None:
        self.http = http
        self.stack = stack

    async def call(
        self,
        method: str,
        path: str,
        json: Any = None,
        *,
        token: str | None = "operator",
        headers: dict[str, str] | None = None,
        **params: str,
    ) -> tuple[int, Any]:
        sent = dict(headers or {})
        if token is not None:
            sent["authorization"] = f"Bearer {self.stack.token if token == 'operator' else token}"
        async with self.http.request(
            method, self.stack.url + "/admin/v1" + path, json=json, headers=sent, params=params
        ) as r:
            return r.status, await r.json()

    async def ok(self, method: str, path: str, json: Any = None, **kw: Any) -> Any:
        status, answer = await self.call(method, path, json, **kw)
        assert status in (200, 201), (status, answer)
        return answer


@pytest.fixture
async def admin(admin_stack: AdminStack) -> AsyncIterator[Admin]:
    async with aiohttp.ClientSession() as http:
        yield Admin(http, admin_stack)
