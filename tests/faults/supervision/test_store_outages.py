"""PostgreSQL down for a minute, and Redis down for 20 s, under a continuous load of 120 requests
in flight (both APIs, streaming and not): the gateway keeps serving (docs/reliability.md,
"PostgreSQL down for a minute under load", "Redis down under load").

Known keys are served from the edge's cache while PostgreSQL is away, the usage records and the
edge's delivery confirmations wait in the JetStream outbox and billing catches up once it is back,
and no record delivered during the outage is settled as undelivered (docs/billing.md, "Billed
only when delivered"). Without Redis, rate limits fail open and routing uses local health. Each
server is stopped cleanly and kept from the supervisor for the length of the outage, then given
back to it (``outage``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import nats
import pytest
from ezat_cli.infra import Embedded
from ezat_common.outbox import drained_before
from ezat_common.subjects import Subjects

from ..load import (
    Gateway,
    History,
    attach_rows,
    check,
    run_waves,
    serves_again,
    summary,
    wait_billed,
)
from .conftest import FaultStack, frozen, outage

pytestmark = pytest.mark.timeout(300)

N = 120
TOKENS = 40
TOKEN_MS = 100  # 4 s requests
RAMP = 4.0  # the clients' first requests spread over one request's length
FAULT_AT = RAMP + 2.0
AFTER = 8.0  # load after the server is back
# Takes a server away for some seconds; returns how long it was away.
Outage = Callable[[Embedded, float], Awaitable[float]]
# A 4 s request with room for the load (nothing in these outages should slow a request down).
BOUND = 4.0 + 6.0
# Billing drains what the outbox gathered during the outage within this long.
CATCH_UP = 30.0
# Then every record is settled: delivery_confirm_seconds (2 s here) and a settling round (5 s).
SETTLED = 2.0 + 5.0 + 2.0


@dataclass
class Window:
    down_at: float = 0.0
    back_at: float = 0.0

    def overlaps(self, h: History) -> bool:
        return h.started < self.back_at and h.ended > self.down_at


def outage_of(
    fs: FaultStack, name: str, seconds: float, window: Window, how: Outage = outage
) -> Callable[[], Awaitable[None]]:
    server = fs.infra.server(name)
    assert server is not None

    async def fault() -> None:
        window.down_at = time.monotonic()
        down = await how(server, seconds)
        window.back_at = window.down_at + down
        print(f"{name}: away {down:.2f}s")

    return fault


async def outbox_caught_up(fs: FaultStack, within: float) -> tuple[int, float]:
    """The outbox's backlog now, and the seconds until billing drained everything it held then
    (``outbox.drained_before`` passes this moment)."""
    subjects = Subjects(fs.stack.extra_env["EZAT_SUBJECT_PREFIX"])
    nc = await nats.connect(fs.infra.nats_url)
    try:
        start, now = time.monotonic(), time.time()
        backlog = (await nc.jetstream().stream_info(subjects.outbox_stream)).state.messages
        while (await drained_before(nc, subjects) or 0.0) < now:
            assert time.monotonic() - start < within, f"outbox not drained after {within}s"
            await asyncio.sleep(0.1)
        return backlog, time.monotonic() - start
    finally:
        await nc.close()


def report(name: str, histories: list[History], window: Window) -> list[History]:
    during = [h for h in histories if window.overlaps(h)]
    ok = sum(h.outcome == "complete" for h in during)
    seconds = sorted(h.seconds for h in histories)
    print(
        f"{name}: {len(histories)} requests {summary(histories)}; during the outage {ok} of "
        f"{len(during)} complete; seconds min {seconds[0]:.2f} "
        f"p50 {seconds[len(seconds) // 2]:.2f} max {seconds[-1]:.2f}"
    )
    return during


def assert_clean_failures(histories: list[History]) -> None:
    """A request that did not complete got a 5xx with retry-after and was not charged."""
    unclean = [
        (h.kind, h.outcome, h.status, h.retry_after, h.error[:80])
        for h in histories
        if h.outcome != "complete" and not (h.status >= 500 and h.retry_after)
    ]
    assert not unclean, unclean
    charged = [
        (h.kind, h.rows) for h in histories
        if h.outcome != "complete" and any(r["cost_micros"] > 0 for r in h.rows)
    ]  # fmt: skip
    assert not charged, charged


async def test_postgres_down_for_a_minute_under_load(fault_stack: FaultStack) -> None:
    await postgres_away(fault_stack, outage, 60.0)


async def test_postgres_unreachable_under_load(fault_stack: FaultStack) -> None:
    """Frozen (SIGSTOP) rather than stopped: connections stay open and every call waits for its
    timeout instead of failing at once."""
    await postgres_away(fault_stack, frozen, 20.0)


async def postgres_away(fs: FaultStack, how: Outage, seconds: float) -> None:
    target = Gateway(fs.stack, fs.url, fs.key, fs.infra.database_url)
    assert await fs.ask()  # the key is known to the edge: cached before the outage
    window = Window()
    pg_outage = outage_of(fs, "postgres", seconds, window, how)

    async def fault() -> None:
        await pg_outage()
        backlog, caught_up = await outbox_caught_up(fs, CATCH_UP)
        print(f"postgres: outbox backlog {backlog} messages, drained {caught_up:.2f}s after")

    histories = await run_waves(target, N, TOKENS, fault, FAULT_AT, AFTER, TOKEN_MS, RAMP)
    during = report("postgres", histories, window)
    billed = await wait_billed(target, histories, CATCH_UP)
    print(f"postgres: every complete answer billed {billed:.2f}s after the load")
    # Past the confirmation time of the last record drained: a record delivered during the
    # outage whose confirmation billing applied late would be voided by now.
    await attach_rows(target, histories, SETTLED)
    check(histories, BOUND)
    assert_clean_failures(histories)
    assert len(during) >= N * seconds // 8, "the load did not run through the outage"
    # Every complete answer was settled as delivered, none still waiting, none voided.
    voided = [h.request_id for h in histories for r in h.rows if r["error_type"] == "undelivered"]
    assert not voided, f"{len(voided)} delivered records voided: {voided[:5]}"
    waiting = [h.request_id for h in histories for r in h.rows if r["awaiting_delivery"]]
    assert not waiting, f"{len(waiting)} records never settled"
    assert all(h.outcome == "complete" for h in during), summary(during)
    await serves_again(target)


async def test_redis_down_under_load(fault_stack: FaultStack) -> None:
    fs = fault_stack
    # A key with a limit, so that the edge's rate limiter asks Redis on every request.
    key = await fs.new_key(rpm=1_000_000)
    target = Gateway(fs.stack, fs.url, key, fs.infra.database_url)
    window = Window()
    fault = outage_of(fs, "redis", 20.0, window)
    histories = await run_waves(target, N, TOKENS, fault, FAULT_AT, AFTER, TOKEN_MS, RAMP)
    during = report("redis", histories, window)
    caught_up = await wait_billed(target, histories, CATCH_UP)
    print(f"redis: every complete answer billed {caught_up:.2f}s after the load")
    await attach_rows(target, histories, SETTLED)
    check(histories, BOUND)
    assert_clean_failures(histories)
    assert len(during) >= N * 20 // 8, "the load did not run through the outage"
    assert all(h.outcome == "complete" for h in during), summary(during)
    await serves_again(target)
