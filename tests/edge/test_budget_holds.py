"""Budget holds (docs/billing.md, "Budget holds"): many concurrent requests of both APIs,
streamed and not, with random ``max_tokens``, against a key (then a team of two keys) whose
budget fits about ``FITS`` of them: the stored spend never exceeds the budget, every refusal is
the 403 with the budget message, and no hold is left once the rows are stored."""

from __future__ import annotations

import asyncio
import random
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anthropic
import asyncpg
import openai
import pytest
from ezat_cli.infra import Infra, free_port
from ezat_common import db
from support.config import SONNET, base_url, listen, one_simulator, write_config
from support.holds import no_holds_left
from support.stack import running

# The issue asks 1,000; the two-core test machine runs 200 in a reasonable time (docs/billing.md
# has the 1,000 run). Raise it to try.
REQUESTS = 200
FITS = 50  # the budget is worth about this many average worst cases
MAX_TOKENS = (16, 256)
# $3 / $15 per million tokens (support/config.py): the average worst case is about 60 input
# tokens (the body's bytes / 4) x 3 µ$ + 136 output tokens x 15 µ$.
AVERAGE_WORST = 60 * 3 + sum(MAX_TOKENS) // 2 * 15
BUDGET = FITS * AVERAGE_WORST
CLIENT_TIMEOUT = 120.0
ROWS_TIMEOUT = 90.0


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


async def _send(url: str, secret: str, n: int, rng: random.Random) -> str:
    """One request, kind ``n % 4``: "ok", or "refused" for the budget's 403."""
    max_tokens = rng.randint(*MAX_TOKENS)
    # The simulator answers exactly max_tokens tokens: the output is the worst case.
    text = f"[sim:tokens={max_tokens}] Hello {n}"
    messages = [{"role": "user", "content": text}]
    try:
        if n % 4 < 2:
            async with anthropic.AsyncAnthropic(
                base_url=url, api_key=secret, max_retries=0, timeout=CLIENT_TIMEOUT
            ) as a:
                if n % 2:
                    async with a.messages.stream(
                        model=SONNET,
                        max_tokens=max_tokens,
                        messages=messages,  # type: ignore[arg-type]
                    ) as stream:
                        await stream.get_final_message()
                else:
                    await a.messages.create(
                        model=SONNET,
                        max_tokens=max_tokens,
                        messages=messages,  # type: ignore[arg-type]
                    )
            return "ok"
        async with openai.AsyncOpenAI(
            base_url=url + "/openai/v1", api_key=secret, max_retries=0, timeout=CLIENT_TIMEOUT
        ) as o:
            if n % 2:
                chunks = await o.chat.completions.create(
                    model=SONNET,
                    max_tokens=max_tokens,
                    messages=messages,  # type: ignore[arg-type]
                    stream=True,
                )
                async for _ in chunks:
                    pass
            else:
                await o.chat.completions.create(
                    model=SONNET,
                    max_tokens=max_tokens,
                    messages=messages,  # type: ignore[arg-type]
                )
        return "ok"
    except (anthropic.PermissionDeniedError, openai.PermissionDeniedError) as exc:
        assert exc.status_code == 403
        assert "monthly budget" in str(exc), exc
        return "refused"


async def _stored(database_url: str, key_ids: list[str], admitted: int) -> int:
    """The stored spend of ``key_ids`` once all ``admitted`` rows are stored."""
    conn = await asyncpg.connect(database_url)
    try:
        deadline = asyncio.get_running_loop().time() + ROWS_TIMEOUT
        while True:
            row = await conn.fetchrow(
                "SELECT count(*) AS n, coalesce(sum(cost_micros), 0)::int8 AS cost"
                " FROM usage_records WHERE key_id = ANY($1::text[])",
                key_ids,
            )
            assert row is not None
            if row["n"] >= admitted or asyncio.get_running_loop().time() > deadline:
                assert row["n"] == admitted, (row["n"], admitted)
                return int(row["cost"])
            await asyncio.sleep(0.5)
    finally:
        await conn.close()


async def _load(stack: HoldStack, secrets_: list[str]) -> tuple[int, int]:
    rng = random.Random(28)
    outcomes = await asyncio.gather(
        *(_send(stack.url, secrets_[n % len(secrets_)], n, rng) for n in range(REQUESTS))
    )
    return outcomes.count("ok"), outcomes.count("refused")


async def test_a_key_budget_is_never_overshot(hold_stack: HoldStack) -> None:
    conn = await asyncpg.connect(hold_stack.database_url)
    try:
        key, secret = await db.create_key(conn, "holds-key", monthly_budget_micros=BUDGET)
    finally:
        await conn.close()
    admitted, refused = await _load(hold_stack, [secret])
    assert admitted + refused == REQUESTS
    assert refused > 0 and admitted >= FITS // 2, (admitted, refused)
    spent = await _stored(hold_stack.database_url, [key.id], admitted)
    assert 0 < spent <= BUDGET, (spent, BUDGET)
    print(f"key: {admitted} admitted, {refused} refused, spent {spent} of {BUDGET} µ$")
    counters = await no_holds_left(hold_stack.redis_url, hold_stack.prefix, [f"key:{key.id}"])
    assert counters == {f"key:{key.id}": spent}  # each row counted once


async def test_a_team_budget_shared_by_two_keys_is_never_overshot(hold_stack: HoldStack) -> None:
    team_id = "team_" + secrets.token_hex(6)
    conn = await asyncpg.connect(hold_stack.database_url)
    try:
        await conn.execute(
            "INSERT INTO teams (id, name, monthly_budget_micros) VALUES ($1, $2, $3)",
            team_id,
            team_id,
            BUDGET,
        )
        one, first = await db.create_key(conn, "holds-team-1", team_id=team_id)
        two, second = await db.create_key(conn, "holds-team-2", team_id=team_id)
    finally:
        await conn.close()
    admitted, refused = await _load(hold_stack, [first, second])
    assert admitted + refused == REQUESTS
    assert refused > 0 and admitted >= FITS // 2, (admitted, refused)
    spent = await _stored(hold_stack.database_url, [one.id, two.id], admitted)
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
