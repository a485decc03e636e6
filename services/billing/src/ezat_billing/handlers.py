"""NATS handlers: thin glue from messages to pricing, the batcher and the store.

``usage_record`` (router -> billing, request/reply): price, store durably, answer a ``UsageAck``;
an ``ok=false`` answer means the record is not stored, so the router reports the request failed.
``usage_query`` (edge/CLI -> billing, request/reply): one page of a key's usage as public JSON.
"""

from __future__ import annotations

import logging

import asyncpg
import msgspec
from ezat_common import envelopes, logs
from ezat_common.catalogue import Prices
from ezat_common.envelopes import UsageAck, UsageRecord
from nats.aio.msg import Msg

from . import metrics, store
from .batcher import Batcher, BatcherStopped, DeadlineExceeded
from .config import Settings
from .core.page import UsageError, encode_page
from .core.pricing import FREE, cost_micros
from .core.query import QueryError
from .core.rows import problem_of, to_row

log = logging.getLogger("ezat.billing")

UNAVAILABLE = "usage: the usage store is unavailable; retry shortly"


class Handlers:
    def __init__(self, settings: Settings, batcher: Batcher, pool: asyncpg.Pool) -> None:
        self._settings = settings
        self._batcher = batcher
        self._pool = pool

    async def on_usage_record(self, msg: Msg) -> None:
        ack = await self.ack_for(msg.data)
        if msg.reply:  # a record published without a reply subject is stored all the same
            await msg.respond(envelopes.encode(ack))

    async def ack_for(self, data: bytes) -> UsageAck:
        """Store the encoded record and say whether (and at what cost) it is durable."""
        try:
            record = envelopes.decode_usage_record(data)
        except msgspec.DecodeError as exc:
            metrics.ACK_FAILURES.labels("invalid").inc()
            return UsageAck(request_id="", ok=False, error=f"invalid usage record: {exc}")
        logs.request_id.set(record.request_id)
        problem = problem_of(record)
        if problem is not None:
            metrics.ACK_FAILURES.labels("invalid").inc()
            log.error("usage record refused: %s", problem)
            return UsageAck(request_id=record.request_id, ok=False, error=problem)
        prices = self.prices_for(record)
        row = to_row(record, prices, cost_micros(record, prices))
        try:
            stored = await self._batcher.submit(row)
        except DeadlineExceeded as exc:
            metrics.ACK_FAILURES.labels("deadline").inc()
            log.warning("usage record not stored: %s", exc)
            return UsageAck(request_id=record.request_id, ok=False, error=str(exc))
        except BatcherStopped as exc:
            metrics.ACK_FAILURES.labels("stopping").inc()
            return UsageAck(request_id=record.request_id, ok=False, error=str(exc))
        return UsageAck(request_id=record.request_id, ok=True, cost_micros=stored.cost_micros)

    def prices_for(self, record: UsageRecord) -> Prices:
        prices = self._settings.prices.get(record.model)
        if prices is None:
            # The router sends canonical ids; an alias still prices correctly.
            model = self._settings.catalogue.resolve(record.model)
            prices = self._settings.prices.get(model.id) if model else None
        if prices is None:
            # The tokens are facts worth keeping even if the price is unknown: stored at 0, loudly.
            log.warning("no price for model %r: recorded at cost 0", record.model)
            return FREE
        return prices

    async def on_usage_query(self, msg: Msg) -> None:
        if msg.reply:  # a query nobody waits for is not worth a database round trip
            await msg.respond(await self.page_for(msg.data))

    async def page_for(self, data: bytes) -> bytes:
        """The JSON usage page for an encoded ``UsageQuery``, or ``{"error": …}``."""
        try:
            q = envelopes.decode_usage_query(data)
        except msgspec.DecodeError as exc:
            metrics.QUERIES.labels("invalid").inc()
            return encode_page(UsageError(error=f"invalid usage query: {exc}"))
        model = q.model
        if model is not None:
            resolved = self._settings.catalogue.resolve(model)
            model = resolved.id if resolved else model.strip()
        try:
            page = await store.query_usage(
                self._pool, q.key_id, q.since, q.until, model, q.limit, q.cursor
            )
        except QueryError as exc:
            metrics.QUERIES.labels("invalid").inc()
            return encode_page(UsageError(error=str(exc)))
        except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            metrics.QUERIES.labels("unavailable").inc()
            log.warning("usage query failed: %r", exc)
            return encode_page(UsageError(error=UNAVAILABLE))
        metrics.QUERIES.labels("ok").inc()
        return encode_page(page)
