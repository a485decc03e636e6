"""NATS handlers: thin glue from messages to pricing, the batcher and the store.

``usage_record`` (router -> billing, request/reply): price, store durably, answer a ``UsageAck``.
Durable means committed in PostgreSQL or, when PostgreSQL does not confirm within the deadline
(down, slow, billing stopping), stored in the JetStream outbox that ``drain`` empties into
PostgreSQL later. An ``ok=false`` answer means neither happened and never will (or the record is
invalid): the router reports the request failed and it is not charged. So ``ok=false`` is only
given when the batcher says the row is certainly not stored; how long that takes is the
batcher's business (``Batcher.submit`` gives up on a queued row at its deadline, and waits for
the verdict of a row whose transaction is in flight). When the outcome stays unknown (billing
stopped mid-write) and the outbox cannot take a copy either, no answer is sent: the router
times out, the documented "lost acknowledgement" window, instead of a false "not charged".
``usage_query`` (edge/CLI -> billing, request/reply): one page of a key's usage (``UsageReply``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

import asyncpg
import msgspec
from ezat_common import envelopes, logs, tracing
from ezat_common.catalogue import Prices
from ezat_common.envelopes import UsageAck, UsageRecord
from ezat_common.outbox import Outbox
from ezat_common.pricing import Pricer
from ezat_common.undecodable import undecodable
from ezat_common.usage_page import UsageError
from nats.aio.msg import Msg

from . import metrics, spans, store
from .batcher import Batcher, BatcherStopped, DeadlineExceeded, StoppedInDoubt
from .config import Settings
from .core.pricing import FREE, cost_micros
from .core.query import QueryError
from .core.rows import UsageRow, problem_of, to_row

log = logging.getLogger("ezat.billing")

UNAVAILABLE = "usage: the usage store is unavailable; retry shortly"
NOT_DURABLE = "usage record not stored (PostgreSQL and the outbox both unavailable); not charged"


class Handlers:
    def __init__(
        self,
        settings: Settings,
        batcher: Batcher,
        pool: asyncpg.Pool,
        outbox: Outbox,
        barrier: Callable[[], Awaitable[bool]] | None = None,
    ) -> None:
        self._settings = settings
        self._pricer = Pricer(settings.catalogue)
        self._batcher = batcher
        self._pool = pool
        self._outbox = outbox
        # The outbox drain's read barrier, for queries that ask for it (``UsageQuery.fresh``).
        self.barrier = barrier

    async def on_usage_record(self, msg: Msg) -> None:
        ack = await self.ack_for(msg.data, msg.subject, tracing.received(msg.headers))
        if ack is None:  # outcome unknown: no answer rather than a wrong one
            return
        if msg.reply:  # a record published without a reply subject is stored all the same
            await msg.respond(envelopes.encode(ack))

    async def ack_for(
        self, data: bytes, subject: str = "", traceparent: str | None = None
    ) -> UsageAck | None:
        """Store the encoded record (received on ``subject``) and say whether (and at what cost)
        it is durable; None when that cannot be known (then nothing must be answered). The time
        it took is observed by outcome (``ezat_billing_ack_seconds``). With tracing on, a valid
        record's storing is a ``billing record`` span, child of ``traceparent`` (the router's
        routing span, which asked)."""
        started = time.perf_counter()
        try:
            record = envelopes.decode_usage_record(data)
        except msgspec.DecodeError as exc:
            undecodable("usage_record", subject, exc)
            metrics.ACK_FAILURES.labels("invalid").inc()
            ack = UsageAck(request_id="", ok=False, error=f"invalid usage record: {exc}")
            return _answered(started, ack, "refused")
        logs.request_id.set(record.request_id)
        problem = problem_of(record)
        if problem is not None:
            metrics.ACK_FAILURES.labels("invalid").inc()
            log.error("usage record refused: %s", problem)
            ack = UsageAck(request_id=record.request_id, ok=False, error=problem)
            return _answered(started, ack, "refused")
        row = self.row_for(record)
        if not (tracing.ENABLED and traceparent):
            return await self._store(record, row, data, started, traceparent)
        span = spans.record(row, traceparent)
        try:
            answer = await self._store(record, row, data, started, tracing.traceparent(span))
        except BaseException as exc:
            spans.end_records((span,), type(exc).__name__)
            raise
        spans.end_records((span,), spans.failure_of(answer))
        return answer

    async def _store(
        self,
        record: UsageRecord,
        row: UsageRow,
        data: bytes,
        started: float,
        traceparent: str | None,
    ) -> UsageAck | None:
        """``ack_for``'s storing of a valid record: PostgreSQL, else the outbox (its message
        carrying ``traceparent``, for the drain's span)."""
        settings = self._settings
        deadline = settings.ack_deadline if self._batcher.healthy else settings.degraded_deadline
        in_doubt = False
        try:
            # No outer timeout here: cancelling submit while the row's transaction is in flight
            # would answer "not stored" for a row that may still commit. submit itself gives up
            # only on a row that is certainly not stored (DeadlineExceeded, BatcherStopped).
            stored = await self._batcher.submit(row, deadline=deadline)
            ack = UsageAck(request_id=record.request_id, ok=True, cost_micros=stored.cost_micros)
            return _answered(started, ack, "stored")
        except StoppedInDoubt:
            reason, in_doubt = "stopping", True
        except BatcherStopped:
            reason = "stopping"
        except DeadlineExceeded:
            reason = "deadline"
        # Not stored (or, in doubt, perhaps stored): the outbox copy is idempotent on the uid.
        if await self._outbox.put(row.uid, data, settings.outbox_timeout, traceparent):
            metrics.OUTBOXED.labels(reason).inc()
            ack = UsageAck(request_id=record.request_id, ok=True, cost_micros=row.cost_micros)
            return _answered(started, ack, "outboxed")
        metrics.ACK_FAILURES.labels(reason).inc()
        if in_doubt:
            log.error(
                "usage record outcome unknown (billing stopped mid-write, outbox unavailable); "
                "not answered",
                extra={"fields": {"uid": row.uid}},
            )
            _ACK_OBSERVE["unanswered"](time.perf_counter() - started)
            return None
        log.warning("usage record not stored: %s", NOT_DURABLE, extra={"fields": {"uid": row.uid}})
        ack = UsageAck(request_id=record.request_id, ok=False, error=NOT_DURABLE)
        return _answered(started, ack, "refused")

    def row_for(self, record: UsageRecord) -> UsageRow:
        """The priced row of a valid record: at the prices the router priced its answer at when
        it says (so the row's cost is the answer's ``cost_usd``), else at the config's now."""
        prices = record.prices if record.prices is not None else self.prices_for(record)
        return to_row(record, prices, cost_micros(record, prices))

    def prices_for(self, record: UsageRecord) -> Prices:
        """The deployment's price when it has one, else the model's (core/pricing.py)."""
        prices = self._pricer.prices(record)
        if prices is None:
            # The tokens are facts worth keeping even if the price is unknown: stored at 0, loudly.
            log.warning("no price for model %r: recorded at cost 0", record.model)
            return FREE
        return prices

    async def on_usage_query(self, msg: Msg) -> None:
        if msg.reply:  # a query nobody waits for is not worth a database round trip
            await msg.respond(await self.page_for(msg.data, msg.subject))

    async def page_for(self, data: bytes, subject: str = "") -> bytes:
        """The encoded ``UsageReply`` for an encoded ``UsageQuery`` (received on ``subject``): a
        page, or a ``UsageError``."""
        try:
            q = envelopes.decode_usage_query(data)
        except msgspec.DecodeError as exc:
            undecodable("usage_query", subject, exc)
            metrics.QUERIES.labels("invalid").inc()
            return envelopes.encode(UsageError(error=f"invalid usage query: {exc}"))
        if q.fresh and self.barrier is not None:
            await self.barrier()
        model = q.model
        if model is not None:
            resolved = self._settings.catalogue.resolve(model)
            model = resolved.id if resolved else model.strip()
        try:
            page = await store.query_usage(
                self._pool, q.key_id, q.since, q.until, model, q.limit, q.cursor, team_id=q.team_id
            )
        except QueryError as exc:
            metrics.QUERIES.labels("invalid").inc()
            return envelopes.encode(UsageError(error=str(exc)))
        except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            metrics.QUERIES.labels("unavailable").inc()
            log.warning("usage query failed: %r", exc)
            return envelopes.encode(UsageError(error=UNAVAILABLE))
        metrics.QUERIES.labels("ok").inc()
        return envelopes.encode(page)


# Bound once: a label lookup takes a lock, and this runs for every record.
_ACK_OBSERVE = {
    outcome: metrics.ACK_SECONDS.labels(outcome).observe
    for outcome in ("stored", "outboxed", "refused", "unanswered")
}


def _answered(started: float, ack: UsageAck, outcome: str) -> UsageAck:
    """``ack``, its time since ``started`` (``perf_counter``) observed under ``outcome``."""
    _ACK_OBSERVE[outcome](time.perf_counter() - started)
    return ack
