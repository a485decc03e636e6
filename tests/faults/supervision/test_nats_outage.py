"""NATS gone for 10 s (stopped, kept from the supervisor) with 120 requests in flight: every
request ends within 5 s of the fault with the API's error, or completes; nothing is charged for
an answer its client did not get; requests made during the outage are refused promptly; the
stack serves again once NATS is back (docs/reliability.md, "NATS dies")."""

from __future__ import annotations

import asyncio
import time

import pytest

from ..load import Gateway, History, attach_rows, check, one, ranges, run_load, serves_again
from .conftest import FaultStack, outage

pytestmark = pytest.mark.timeout(180)

N = 120
TOKENS = 40
TOKEN_MS = 100  # 4 s requests: the outage starts mid-way
FAULT_AT = 1.0
AWAY = 10.0
# Every request in flight ends this soon after NATS went: the holders' silence (3 s), with room.
ERROR_BOUND = 5.0
# Then every record the routers stored for an undelivered answer is settled: the outbox drained
# once NATS is back, delivery_confirm_seconds (2 s here) and a settling round (5 s).
SETTLED = 2.0 + 5.0 + 5.0


async def test_nats_down_for_ten_seconds_ends_every_request_promptly(
    fault_stack: FaultStack,
) -> None:
    fs = fault_stack
    server = fs.infra.server("nats")
    assert server is not None
    target = Gateway(fs.stack, fs.url, fs.key, fs.infra.database_url)
    assert await fs.ask()  # the key is cached at the edge
    down: list[float] = []
    during: list[History] = []
    away: list[asyncio.Task[float]] = []

    async def later_requests() -> None:
        await asyncio.sleep(1.0)  # made while NATS is away
        during.extend(
            await asyncio.gather(*(one(target, k, 4) for k in ("anthropic-json", "openai-stream")))
        )

    async def fault() -> None:
        down.append(time.monotonic())
        away.append(asyncio.create_task(outage(server, AWAY)))
        await later_requests()

    histories = await run_load(target, N, TOKENS, fault, FAULT_AT, settle=0.0, token_ms=TOKEN_MS)
    print("nats away", ranges(histories, since=down[0]), "during", ranges(during))
    check(histories, FAULT_AT + ERROR_BOUND + 1.0)
    for h in histories:
        if h.outcome != "complete":
            assert h.ended - down[0] <= ERROR_BOUND, (h.kind, round(h.ended - down[0], 2), h.error)
    for h in during:
        assert h.outcome in ("http_error", "stream_error"), h
        assert h.seconds <= ERROR_BOUND, (h.kind, round(h.seconds, 2), h.error)
        assert h.outcome == "stream_error" or (h.status >= 500 and h.retry_after), h.error
    # NATS back: the stack serves again by itself, and nothing undelivered stays charged.
    print(f"nats away {await away[0]:.2f} s")
    await serves_again(target, within=20.0)
    await asyncio.sleep(SETTLED)
    await attach_rows(target, histories + during)
    charged = [
        (h.kind, h.outcome, h.rows) for h in histories + during
        if h.outcome != "complete" and any(r["cost_micros"] > 0 for r in h.rows)
    ]  # fmt: skip
    assert not charged, charged
