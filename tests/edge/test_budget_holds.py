"""Budget holds (docs/billing.md, "Budget holds"): many concurrent requests of both APIs,
streamed and not, with random ``max_tokens``, against a key (then a team of two keys) whose
budget fits about ``FITS`` of them: the stored spend never exceeds the budget, every refusal is
the 403 with the budget message, and no hold is left once the rows are stored."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anthropic
import asyncpg
import pytest
from ezat_cli.infra import Infra, free_port
from ezat_common import db
from support.budget_load import (
    AVERAGE_WORST,
    CLIENT_TIMEOUT,
    counts,
    load,
    stored,
    team_of_two_keys,
)
from support.config import SONNET, base_url, listen, one_simulator, write_config
from support.holds import no_holds_left
from support.stack import running

# The issue asks 1,000; the two-core test machine runs 200 in a reasonable time (docs/billing.md
# has the 1,000 run). Raise it to try.
REQUESTS = 200
FITS = 50  # the budget is worth about this many average worst cases
BUDGET = FITS * AVERAGE_WORST


@dataclass
class HoldStack:
    url: str
    database_url: str
    redis_url: str
    prefix: str


@pytest.fixture(scope="module")
def hold_stack(infra: Infra, database_url: str, data_dir: Path) -> Iterator[HoldStack]:
    edge, sim = free_port(), free_port()
    sections = one_simulator(edge, sim, simulators=[{"name": "holds-sim", "listen": listen(sim)}])
    config = write_config(data_dir / f"holds-{edge}" / "ezat.toml", **sections)
    shared = Infra(infra.nats_url, database_url, infra.redis_url)  # stops none of the servers
    prefix = f"holds{edge}"
    with running(config, shared, prefix):
        yield HoldStack(base_url(edge), database_url, infra.redis_url, prefix)


async def _load(stack: HoldStack, secrets_: list[str]) -> tuple[int, int]:
    found = counts(await load([stack.url], secrets_, REQUESTS))
    return found.get("ok", 0), found.get("refused", 0)


async def test_a_key_budget_is_never_overshot(hold_stack: HoldStack) -> None:
    conn = await asyncpg.connect(hold_stack.database_url)
    try:
        key, secret = await db.create_key(conn, "holds-key", monthly_budget_micros=BUDGET)
    finally:
        await conn.close()
    admitted, refused = await _load(hold_stack, [secret])
    assert admitted + refused == REQUESTS
    assert refused > 0 and admitted >= FITS // 2, (admitted, refused)
    spent = await stored(hold_stack.database_url, [key.id], admitted)
    assert 0 < spent <= BUDGET, (spent, BUDGET)
    print(f"key: {admitted} admitted, {refused} refused, spent {spent} of {BUDGET} µ$")
    counters = await no_holds_left(hold_stack.redis_url, hold_stack.prefix, [f"key:{key.id}"])
    assert counters == {f"key:{key.id}": spent}  # each row counted once


async def test_a_team_budget_shared_by_two_keys_is_never_overshot(hold_stack: HoldStack) -> None:
    team_id, key_ids, (first, second) = await team_of_two_keys(
        hold_stack.database_url, BUDGET, "holds-team"
    )
    admitted, refused = await _load(hold_stack, [first, second])
    assert admitted + refused == REQUESTS
    assert refused > 0 and admitted >= FITS // 2, (admitted, refused)
    spent = await stored(hold_stack.database_url, key_ids, admitted)
    assert 0 < spent <= BUDGET, (spent, BUDGET)
    print(f"team: {admitted} admitted, {refused} refused, spent {spent} of {BUDGET} µ$")
    counters = await no_holds_left(hold_stack.redis_url, hold_stack.prefix, [f"team:{team_id}"])
    assert counters == {f"team:{team_id}": spent}


async def test_a_request_refused_400_frees_its_hold_at_once(hold_stack: HoldStack) -> None:
    conn = await asyncpg.connect(hold_stack.database_url)
    try:
        key, secret = await db.create_key(conn, "holds-400", monthly_budget_micros=BUDGET)
    finally:
        await conn.close()
    async with anthropic.AsyncAnthropic(
        base_url=hold_stack.url, api_key=secret, max_retries=0, timeout=CLIENT_TIMEOUT
    ) as client:
        with pytest.raises(anthropic.BadRequestError):
            await client.messages.create(model=SONNET, max_tokens=16, messages=[])
    await no_holds_left(hold_stack.redis_url, hold_stack.prefix, [f"key:{key.id}"])
