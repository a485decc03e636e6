"""The load of the budget overshoot tests (docs/billing.md, "Budget holds"): requests of both APIs
(Anthropic Messages and chat completions, streamed and not) with random ``max_tokens``, which the
simulator answers in full, so that each costs about its worst case; what each client saw; the
stored spend, the rows of each request and the holds left in Redis once it is over.

Used by tests/edge/test_budget_holds.py (one edge) and tests/faults/test_budget_faults.py (two
edges, billing killed, Redis down)."""

from __future__ import annotations

import asyncio
import random
import secrets
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import anthropic
import asyncpg
import openai
from ezat_common import db

from .config import SONNET

MAX_TOKENS = (16, 256)
# $3 / $15 per million tokens (support/config.py): the average worst case is about 60 input
# tokens (the body's bytes / 4) x 3 µ$ + 136 output tokens x 15 µ$.
AVERAGE_WORST = 60 * 3 + sum(MAX_TOKENS) // 2 * 15
CLIENT_TIMEOUT = 120.0
ROWS_TIMEOUT = 90.0
BUDGET_MESSAGE = "monthly budget"

# ok: answered in full; refused: the budget's 403; unavailable: the 503 with retry-after of a
# budget that cannot be checked (fail closed); error: anything else; hung: no end in time.
Outcome = Literal["ok", "refused", "unavailable", "error", "hung"]


@dataclass
class Sent:
    request_id: str
    outcome: Outcome
    started: float  # time.monotonic()
    ended: float = 0.0
    status: int = 0
    error: str = ""
    retry_after: str | None = None


async def _call(url: str, secret: str, n: int, max_tokens: int, text: str, rid: str) -> None:
    """Request kind ``n % 4``: Anthropic JSON, Anthropic stream, chat JSON, chat stream."""
    messages: Any = [{"role": "user", "content": text}]
    headers = {"x-request-id": rid}
    if n % 4 < 2:
        async with anthropic.AsyncAnthropic(
            base_url=url, api_key=secret, max_retries=0, timeout=CLIENT_TIMEOUT
        ) as a:
            args: dict[str, Any] = {"model": SONNET, "max_tokens": max_tokens}
            if n % 2:
                async with a.messages.stream(
                    **args, messages=messages, extra_headers=headers
                ) as stream:
                    await stream.get_final_message()
            else:
                await a.messages.create(**args, messages=messages, extra_headers=headers)
        return
    async with openai.AsyncOpenAI(
        base_url=url + "/openai/v1", api_key=secret, max_retries=0, timeout=CLIENT_TIMEOUT
    ) as o:
        if n % 2:
            chunks = await o.chat.completions.create(
                model=SONNET,
                max_tokens=max_tokens,
                messages=messages,
                stream=True,
                extra_headers=headers,
            )
            async for _ in chunks:
                pass
        else:
            await o.chat.completions.create(
                model=SONNET, max_tokens=max_tokens, messages=messages, extra_headers=headers
            )


async def send(
    url: str,
    secret: str,
    n: int,
    rng: random.Random,
    token_ms: int | None = None,
    bound: float = CLIENT_TIMEOUT,
) -> Sent:
    """One request of kind ``n % 4``; ``token_ms`` paces the simulator, ``bound`` is the seconds
    after which it counts as hung."""
    max_tokens = rng.randint(*MAX_TOKENS)
    pace = f" token_ms={token_ms}" if token_ms is not None else ""
    # The simulator answers exactly max_tokens tokens: the output is the worst case.
    text = f"[sim:tokens={max_tokens}{pace}] Hello {n}"
    sent = Sent(f"bud-{uuid.uuid4().hex[:16]}", "ok", time.monotonic())
    try:
        await asyncio.wait_for(_call(url, secret, n, max_tokens, text, sent.request_id), bound)
    except TimeoutError:
        sent.outcome = "hung"
    except (anthropic.APIStatusError, openai.APIStatusError) as exc:
        sent.status, sent.error = exc.status_code, str(exc)[:300]
        sent.retry_after = exc.response.headers.get("retry-after")
        if exc.status_code == 403 and BUDGET_MESSAGE in sent.error:
            sent.outcome = "refused"
        elif exc.status_code == 503 and sent.retry_after and BUDGET_MESSAGE in sent.error:
            sent.outcome = "unavailable"
        else:
            sent.outcome = "error"
    except Exception as exc:  # a broken connection, an error event inside a stream
        cause = f" ({exc.__cause__!r})" if exc.__cause__ is not None else ""
        sent.outcome, sent.error = "error", f"{type(exc).__name__}: {str(exc)[:300]}{cause}"
    sent.ended = time.monotonic()
    return sent


async def load(
    urls: Sequence[str],
    secrets_: Sequence[str],
    requests: int,
    spread: float = 0.0,
    token_ms: int | None = None,
    bound: float = CLIENT_TIMEOUT,
    seed: int = 28,
) -> list[Sent]:
    """``requests`` requests, request ``n`` with secret ``n % len(secrets_)`` to edge
    ``n // len(secrets_) % len(urls)`` (each key on every edge), all at once or their starts
    spread evenly over ``spread`` seconds; in the order of ``n``."""
    rng = random.Random(seed)

    async def one(n: int) -> Sent:
        await asyncio.sleep(spread * n / requests)
        url = urls[n // len(secrets_) % len(urls)]
        return await send(url, secrets_[n % len(secrets_)], n, rng, token_ms, bound)

    return list(await asyncio.gather(*(one(n) for n in range(requests))))


def counts(sent: Sequence[Sent]) -> dict[str, int]:
    found: dict[str, int] = {}
    for s in sent:
        found[s.outcome] = found.get(s.outcome, 0) + 1
    return found


async def stored(database_url: str, key_ids: list[str], admitted: int) -> int:
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


async def rows_of(database_url: str, request_ids: list[str]) -> dict[str, list[dict[str, Any]]]:
    """The usage rows of each request id (those with none are absent)."""
    conn = await asyncpg.connect(database_url)
    try:
        rows = await conn.fetch(
            "SELECT request_id, status, cost_micros FROM usage_records"
            " WHERE request_id = ANY($1::text[])",
            request_ids,
        )
    finally:
        await conn.close()
    found: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        found.setdefault(row["request_id"], []).append(dict(row))
    return found


async def team_of_two_keys(
    database_url: str, budget: int, name: str
) -> tuple[str, list[str], list[str]]:
    """A team with ``budget`` (micro-dollars) and two keys of none, named ``name-1`` and
    ``name-2``: (team id, key ids, secrets)."""
    team_id = "team_" + secrets.token_hex(6)
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute(
            "INSERT INTO teams (id, name, monthly_budget_micros) VALUES ($1, $2, $3)",
            team_id,
            team_id,
            budget,
        )
        one, first = await db.create_key(conn, f"{name}-1", team_id=team_id)
        two, second = await db.create_key(conn, f"{name}-2", team_id=team_id)
    finally:
        await conn.close()
    return team_id, [one.id, two.id], [first, second]
