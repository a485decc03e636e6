"""Per-scope budget enforcement through real processes (docs/billing.md, "Budget holds"): a stack
on a Redis of its own, which the test stops; then each request held on a budget is decided by
its key's and its team's ``budget_enforcement`` (NULL: ``[edge] budget_enforcement``, here the
default fail_closed), the stricter winning: a fail_open key is answered, a fail_closed key (or
one left to the default) is 503 with retry-after, and a fail_open key in a fail_closed team is
503 too. A key without any budget is served as usual."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import asyncpg
import pytest
from ezat_cli.infra import Infra, free_port, start_redis, stop_process
from ezat_common import db
from support.config import SONNET, base_url, listen, one_simulator, write_config
from support.stack import running

BUDGET = 1_000_000  # $1: far above what these requests cost


@dataclass
class Secrets:
    url: str
    by_name: dict[str, str]


async def _keys(database_url: str) -> dict[str, str]:
    conn = await asyncpg.connect(database_url)
    try:
        team = "team_" + secrets.token_hex(8)
        await conn.execute(
            "INSERT INTO teams (id, name, monthly_budget_micros, budget_enforcement)"
            " VALUES ($1, $2, $3, 'fail_closed')",
            team,
            team,
            BUDGET,
        )

        async def make(name: str, **fields: Any) -> str:
            _, secret = await db.create_key(conn, f"enf-{name}", **fields)
            return str(secret)

        return {
            "open": await make(
                "open", monthly_budget_micros=BUDGET, budget_enforcement="fail_open"
            ),
            "closed": await make(
                "closed", monthly_budget_micros=BUDGET, budget_enforcement="fail_closed"
            ),
            "default": await make("default", monthly_budget_micros=BUDGET),
            "open_in_closed_team": await make(
                "team", monthly_budget_micros=BUDGET, budget_enforcement="fail_open", team_id=team
            ),
            "no_budget": await make("none", budget_enforcement="fail_closed"),
        }
    finally:
        await conn.close()


@pytest.fixture(scope="module")
def redis_gone(infra: Infra, database_url: str, data_dir: Path) -> Iterator[Secrets]:
    """A stack whose own Redis has been stopped (kept from any supervisor: not in its infra)."""
    edge, sim = free_port(), free_port()
    folder = data_dir / f"enforce-{edge}"
    redis_url, redis = start_redis(folder)
    try:
        sections = one_simulator(edge, sim, simulators=[{"name": "enf-sim", "listen": listen(sim)}])
        config = write_config(folder / "ezat.toml", **sections)
        with running(config, Infra(infra.nats_url, database_url, redis_url), f"enf{edge}"):
            names = asyncio.run(_keys(database_url))
            stop_process(redis)
            yield Secrets(base_url(edge), names)
    finally:
        stop_process(redis)


async def _status(url: str, secret: str) -> tuple[int, str | None]:
    """The status of one Messages call, and the retry-after of a 503 (the budget's only)."""
    async with anthropic.AsyncAnthropic(base_url=url, api_key=secret, max_retries=0) as client:
        try:
            await client.messages.create(
                model=SONNET, max_tokens=8, messages=[{"role": "user", "content": "enforce"}]
            )
        except anthropic.APIStatusError as exc:
            if exc.status_code == 503:
                assert "budget: this key's monthly budget cannot be checked" in str(exc), exc
            return exc.status_code, exc.response.headers.get("retry-after")
    return 200, None


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("open", 200),
        ("closed", 503),
        ("default", 503),  # NULL: [edge] budget_enforcement, fail_closed by default
        ("open_in_closed_team", 503),  # the stricter scope wins
        ("no_budget", 200),  # nothing to hold: its enforcement has no say
    ],
)
async def test_each_scope_decides_while_redis_is_unreachable(
    redis_gone: Secrets, name: str, expected: int
) -> None:
    started = time.monotonic()
    status, retry_after = await _status(redis_gone.url, redis_gone.by_name[name])
    assert status == expected, name
    if expected == 503:
        assert retry_after is not None and float(retry_after) > 0
    assert time.monotonic() - started < 10  # decided at once, not after a hang
