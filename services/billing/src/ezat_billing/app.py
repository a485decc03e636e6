"""Wiring of the billing service: config, PostgreSQL, the batcher, NATS subscriptions, health,
metrics, and an orderly stop (no new messages, answer the pending ones, then close)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import asyncpg
from ezat_common import bus, db, kv, lifecycle, logs, readiness, redis_keys, tracing
from ezat_common import subjects as subjects_mod
from ezat_common.config import Config
from ezat_common.config_reload import Reloader
from ezat_common.outbox import Outbox, drained_before
from ezat_common.periodic import Periodic
from ezat_common.runtime import run_service
from ezat_common.spend_counter import SpendCounter
from ezat_common.tasks import TaskSet, stop_task
from nats.aio.msg import Msg

from . import backlog, budgets, config, ledger, settle, store
from .batcher import Batcher
from .core.rows import UsageRow
from .drain import Drain
from .handlers import Handlers

log = logging.getLogger("ezat.billing")

STOP_TIMEOUT = 10.0
# The drain's last round: its fetch (1 s at most) and the batch it brings (drain.py, Drain.finish).
DRAIN_FINISH = 3.0
# Reported by /readyz; "store" says whether one of them is usable, which is what counts.
OPTIONAL = ("postgresql", "outbox")
# Each count of stored rows in the budget scopes' spend counters waits on Redis at most this long.
SPEND_REDIS_TIMEOUT = 0.5
# Seconds between retries of the spend counts a Redis failure left waiting (none: no call).
SPEND_RETRY_EVERY = 1.0


def spawning(
    tasks: TaskSet, handler: Callable[[Msg], Awaitable[None]]
) -> Callable[[Msg], Awaitable[None]]:
    """One task per message: nats-py runs a subscription's callbacks one after another, and a
    record waiting for its group commit must not hold back the records behind it."""

    async def on_msg(msg: Msg) -> None:
        tasks.spawn_guarded(handler(msg), log, "handler failed on %s", msg.subject)

    return on_msg


def database_check(pool: asyncpg.Pool, batcher: Batcher) -> Callable[[], Awaitable[str | None]]:
    async def check() -> str | None:
        if not batcher.running:
            return "billing writer is not running"
        try:
            async with pool.acquire(timeout=1.0) as conn:
                await conn.fetchval("SELECT 1", timeout=1.0)
        except Exception:
            return "postgresql: unreachable"
        return None

    return check


async def watch_database(check: Callable[[], Awaitable[str | None]]) -> None:
    """Log when PostgreSQL becomes reachable, retrying in the background meanwhile: billing starts
    (and reports not-ready) without it rather than crash-looping."""
    delay = 0.5
    while (problem := await check()) is not None:
        log.warning("waiting for PostgreSQL: %s", problem)
        await asyncio.sleep(delay)
        delay = min(delay * 2, 10.0)
    log.info("PostgreSQL reachable")


class Billing:
    """Billing's NATS side, built with connected collaborators (PostgreSQL's pool, a running
    batcher, NATS): the handlers, the outbox drain, the settlement rounds, the outbox's backlog
    gauges and the budget thresholds' gauge."""

    def __init__(
        self,
        settings: config.Settings,
        subjects: subjects_mod.Subjects,
        pool: asyncpg.Pool,
        batcher: Batcher,
        nc: bus.Client,
        ready: readiness.Readiness | None = None,
        counter: SpendCounter | None = None,
    ) -> None:
        self.ready = ready or readiness.Readiness("billing", optional=OPTIONAL)
        # One counter for the live path, the drain and settling, so one retry serves them all.
        counter = counter or spend_counter()
        self.settings = settings
        self.subjects = subjects
        self.batcher = batcher
        self.nc = nc
        outbox = Outbox(nc, subjects)
        write = counted_insert(pool, settings.write_timeout, counter)
        confirm = functools.partial(settle.confirm, pool)
        self.handlers = Handlers(settings, batcher, pool, outbox)
        ledger.publish_prices(settings.prices)
        self.drainer = Drain(nc, subjects, outbox, self.handlers.row_for, write, confirm)
        self.handlers.barrier = self.drainer.barrier
        drained = functools.partial(drained_before, nc, subjects)
        # Rows settled undelivered no longer spend their budgets (docs/billing.md).
        self.settler = Periodic(
            "billing-settle",
            settle.SETTLE_EVERY,
            functools.partial(
                settle.settle_round, pool, settings.delivery_confirm, drained, counter.uncount
            ),
        )
        # Counts a failure left waiting are retried on their own, not only with the next rows:
        # after an outage at the end of a burst no next row may come, and the holds the rows
        # should have replaced would keep budget back until their deadline.
        self.counter = counter
        self.spend_retry = Periodic("billing-spend-retry", SPEND_RETRY_EVERY, counter.retry)
        self.backlog = backlog.Backlog(nc, subjects)
        self.backlog_reader = Periodic(
            "billing-outbox-backlog", backlog.READ_EVERY, self.backlog.read
        )
        billing_cfg = settings.cfg.billing
        self.budget_check = Periodic(
            "billing-budget-check",
            billing_cfg.budget_check_seconds,
            budgets.BudgetCheck(pool, billing_cfg.budget_thresholds).run,
        )
        self.tasks = TaskSet()
        self.subs: list[Any] = []
        self.drain: asyncio.Task[None] | None = None

    async def start(self, check: Callable[[], Awaitable[str | None]]) -> None:
        """Drain the outbox, settle, take usage records and queries, answer health probes."""
        self.drain = asyncio.create_task(self.drainer.run(), name="billing-outbox-drain")
        self.settler.start()
        self.spend_retry.start()
        self.backlog_reader.start()
        self.budget_check.start()
        nc, subjects, tasks, handlers = self.nc, self.subjects, self.tasks, self.handlers
        self.subs = [
            await nc.subscribe(
                subjects.usage_record,
                queue=subjects_mod.QUEUE_BILLING,
                cb=spawning(tasks, handlers.on_usage_record),
            ),
            await nc.subscribe(
                subjects.usage_query,
                queue=subjects_mod.QUEUE_BILLING,
                cb=spawning(tasks, handlers.on_usage_query),
            ),
        ]
        self.ready.use(functools.partial(self.checks, check))
        await bus.serve_health(nc, subjects, "billing", self.ready.problem)

    async def checks(self, database: Callable[[], Awaitable[str | None]]) -> dict[str, str]:
        """Readiness: NATS, the subscriptions, and somewhere to make a record durable:
        PostgreSQL, or the JetStream outbox while PostgreSQL is down (records are acknowledged
        from there, docs/billing.md). Each store is reported; only losing both is unready."""
        out = readiness.nats_check(self.nc, *self.subs)
        problem = await database()
        out["postgresql"] = problem or readiness.OK
        # The last reading is at most READ_EVERY old; without NATS there is no outbox at all.
        outbox = self.nc.is_connected and self.backlog.readable
        out["outbox"] = readiness.OK if outbox else "not readable"
        usable = problem is None or outbox
        out["store"] = readiness.OK if usable else "neither PostgreSQL nor the outbox is usable"
        return out

    async def stop(self) -> None:
        """No new messages (other replicas get them); the ones already delivered are still
        answered, then the drain, the settlement rounds and the batcher stop."""
        await self.ready.stop()
        await lifecycle.stop_taking(*self.subs)
        await self.tasks.wait(self.settings.cfg.shutdown.drain_timeout)
        # Records waiting for their delivery confirmation are stored now; then the drain ends
        # after the round under way (its fetch lasts 1 s at most), so that no message it was
        # delivered waits out ACK_WAIT unacknowledged; cancelled only if that round hangs.
        await self.drainer.flush(timeout=2.0)
        self.drainer.finish()
        if self.drain is not None:
            await asyncio.wait({self.drain}, timeout=DRAIN_FINISH)
        await stop_task(self.drain)
        await self.settler.stop()
        await self.spend_retry.stop()
        await self.counter.retry()  # a last try for counts a failure left waiting
        await self.backlog_reader.stop()
        await self.budget_check.stop()
        await self.batcher.stop(timeout=STOP_TIMEOUT)


def spend_counter() -> SpendCounter:
    """The budgets' monthly spend counters, in the budget store (docs/billing.md)."""
    return SpendCounter(
        kv.from_env(timeout=SPEND_REDIS_TIMEOUT, budgets=True), redis_keys.from_env()
    )


def counted_insert(
    pool: asyncpg.Pool, timeout: float | None, counter: SpendCounter
) -> Callable[[Sequence[UsageRow]], Awaitable[dict[str, store.Stored]]]:
    """``store.insert_batch``, then each stored row counted once in its budget scopes' monthly
    spend in Redis, its hold dropped (docs/billing.md, "Budget holds")."""

    async def write(rows: Sequence[UsageRow]) -> dict[str, store.Stored]:
        stored = await store.insert_batch(pool, rows, timeout=timeout)
        counted = [
            (r.uid, r.key_id, stored[r.uid].cost_micros, r.received_at.timestamp(), r.team_id)
            for r in rows
            if r.uid in stored
        ]
        await counter.count(counted)
        return stored

    return write


def started_batcher(
    settings: config.Settings, pool: asyncpg.Pool, counter: SpendCounter
) -> Batcher:
    """The group-commit writer of usage rows, running (it needs no connection to start)."""
    batcher = Batcher(
        counted_insert(pool, settings.write_timeout, counter),
        functools.partial(store.probe_stored, pool, timeout=settings.write_timeout),
        deadline=settings.ack_deadline,
        max_batch=settings.max_batch,
    )
    batcher.start()
    return batcher


async def disconnect(pool: asyncpg.Pool, nc: bus.Client) -> None:
    """Close PostgreSQL's pool (terminated when it does not close in time), then drain NATS."""
    try:
        await asyncio.wait_for(pool.close(), 5.0)
    except (TimeoutError, Exception):
        pool.terminate()
    with contextlib.suppress(Exception):
        await nc.drain()


async def serve(stop: asyncio.Event, settings: config.Settings | None = None) -> None:
    """Run billing until ``stop`` is set: connect, build with the connections, serve, wait, stop.

    PostgreSQL's side starts before NATS is connected: billing starts (and reports not-ready)
    without PostgreSQL rather than crash-looping, and says when it becomes reachable."""
    settings = settings or config.load()
    subjects = subjects_mod.from_env()
    ready = readiness.Readiness("billing", optional=OPTIONAL)
    # min_size=0: creating the pool never needs the server, every acquire (re)connects on demand.
    pool = await db.pool(min_size=0, max_size=10)
    counter = spend_counter()
    batcher = started_batcher(settings, pool, counter)
    check = database_check(pool, batcher)
    watcher = asyncio.create_task(watch_database(check))
    nc = await bus.connect("billing")
    # After the connection: a replacement waits there for its predecessor (router/app.py).
    readiness.serve(settings.cfg.billing.metrics_listen, ready)
    billing = Billing(settings, subjects, pool, batcher, nc, ready, counter)
    await billing.start(check)

    def reloaded(cfg: Config) -> None:
        config.reload(settings, cfg)
        ledger.publish_prices(settings.prices)

    Reloader("billing", settings.cfg, reloaded).install(asyncio.get_running_loop())
    log.info("billing serving on %s", subjects.usage_record)
    await stop.wait()
    log.info("billing stopping")
    await billing.stop()
    await stop_task(watcher)
    await disconnect(pool, nc)
    log.info("billing stopped")


async def _main(stop: asyncio.Event) -> None:
    logs.setup("billing")
    tracing.setup("billing")
    try:
        await serve(stop)
    finally:
        tracing.shutdown()


def main() -> None:
    run_service(_main)
