"""The outbox drain: a durable JetStream pull consumer that stores outbox records in PostgreSQL.

Each fetched batch is priced, inserted in one transaction (``ON CONFLICT (uid) DO
NOTHING``, so a record also stored by the fast path, published twice, or redelivered after a lost
ack stays one row) and acknowledged only after the commit. A batch that cannot be stored is
handed back (``nak`` with a delay) and retried until PostgreSQL returns; an unreadable or invalid
message is terminated (logged, never retried). Prices are those of the config when drained.

The stream also carries the edge's delivery confirmations (``Delivered``, settle.py). A complete
record waits (unacknowledged) up to ``pairing.HOLD`` for its confirmation, so that the two are
stored as one confirmed row (``core/pairing.py``); confirmations of records stored earlier are
applied in the same round, all acknowledged after the commits. The time each record waited in
the outbox is observed (``ezat_billing_outbox_store_delay_seconds``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence

import msgspec
import nats.errors
from ezat_common import envelopes, outbox, tracing
from ezat_common.envelopes import Delivered, UsageRecord
from ezat_common.outbox import Outbox
from ezat_common.subjects import Subjects
from ezat_common.undecodable import undecodable
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.client import JetStreamContext

from . import metrics, spans
from .core.pairing import Pairing
from .core.rows import UsageRow, problem_of
from .store import Stored

log = logging.getLogger("ezat.billing.drain")

DURABLE = "billing-outbox"
BATCH = 200
ACK_WAIT = 30.0
RETRY_DELAY = 1.0
# After a batch that did not fill up, wait this long before fetching again: records are already
# durable in the outbox, so a few ms of drain delay cost nothing, while every fetch round trip
# and every PostgreSQL transaction is paid per batch (bigger batches: less CPU per record).
LINGER = 0.05

WriteRows = Callable[[Sequence[UsageRow]], Awaitable[Mapping[str, Stored]]]
Confirm = Callable[[Sequence[str]], Awaitable[object]]
RowFor = Callable[[UsageRecord], UsageRow]


class Drain:
    def __init__(
        self,
        nc: Client,
        subjects: Subjects,
        outbox: Outbox,
        row_for: RowFor,
        write: WriteRows,
        confirm: Confirm,
    ) -> None:
        self._nc = nc
        self._subjects = subjects
        self._outbox = outbox
        self._row_for = row_for
        self._write = write
        self._confirm = confirm
        self._wake = asyncio.Event()
        self._pairing: Pairing[Msg] = Pairing()
        self._flush = False
        self._finishing = False
        self.drained = 0

    def finish(self) -> None:
        """End the drain between two rounds (``run`` returns): the fetch under way and the batch it
        brings are still stored and acknowledged. Cancelled instead, a drain drops the messages a
        pull already delivered to it, or a batch it was writing, unacknowledged: JetStream gives
        them to another replica only ``ACK_WAIT`` (30 s) later, so complete answers stay unbilled
        that long (seen in a rolling restart, docs/reliability.md)."""
        self._finishing = True
        self._wake.set()

    def nudge(self) -> None:
        """Fetch now, not after the linger, and store the records waiting for their
        confirmations: a read barrier waits (``barrier``)."""
        self._flush = True
        self._wake.set()

    async def flush(self, timeout: float) -> None:
        """At shutdown, before the drain is cancelled: store the records waiting for their
        confirmations now (``awaiting_delivery``), instead of leaving their messages to be
        redelivered to another replica only after ``ACK_WAIT``."""
        loop = asyncio.get_running_loop()
        until = loop.time() + timeout
        while len(self._pairing) and loop.time() < until:
            self.nudge()
            await asyncio.sleep(0.02)

    async def barrier(self, timeout: float = outbox.BARRIER_TIMEOUT) -> bool:
        """Wait until what the outbox holds now is stored (docs/billing.md, "Queries")."""
        return await outbox.wait_drained(self._nc, self._subjects, timeout, self.nudge)

    async def run(self) -> None:
        """Until ``finish`` (or cancelled): subscribe, then store what arrives, batch by batch."""
        delay = 0.5
        while not self._finishing:
            try:
                sub = await self._subscribe()
            except (nats.errors.Error, TimeoutError, OSError) as exc:
                log.warning("outbox consumer not ready: %r", exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)
                continue
            delay = 0.5
            try:
                await self._consume(sub)
            finally:
                await self._hand_back()
                # A fetch that timed out can leave the server's late status reply queued on the
                # pull subscription; nobody reads it once we stop, and the client's drain at exit
                # would wait its 30 s for it. Unsubscribing drops it (the durable stays).
                with contextlib.suppress(nats.errors.Error, OSError):
                    await sub.unsubscribe()

    async def _hand_back(self) -> None:
        """Records still waiting when the drain stops go back to the stream at once (another
        replica, or this one after a restart, stores them)."""
        for _, msg in self._pairing.take_all():
            with contextlib.suppress(nats.errors.Error, OSError):
                await msg.nak()

    async def _consume(self, sub: JetStreamContext.PullSubscription) -> None:
        loop = asyncio.get_running_loop()
        while not self._finishing:
            due = self._pairing.next_due
            wait = 1.0 if due is None else min(max(due - loop.time(), 0.01), 1.0)
            try:
                msgs = await sub.fetch(BATCH, timeout=wait)
            except TimeoutError:
                msgs = []  # nothing new; records waiting for a confirmation may be due
            except nats.errors.Error as exc:
                log.warning("outbox fetch failed: %r", exc)
                await asyncio.sleep(RETRY_DELAY)
                continue
            if msgs or len(self._pairing) or self._flush:
                await self.store(msgs)
            if len(msgs) < BATCH:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(LINGER):
                        await self._wake.wait()
            self._wake.clear()

    async def _subscribe(self) -> JetStreamContext.PullSubscription:
        await self._outbox.ensure_stream()
        js = self._nc.jetstream()
        config = ConsumerConfig(
            durable_name=DURABLE,
            ack_policy=AckPolicy.EXPLICIT,
            deliver_policy=DeliverPolicy.ALL,
            ack_wait=ACK_WAIT,
            max_ack_pending=10 * BATCH,
        )
        return await js.pull_subscribe(
            self._subjects.usage_outbox,
            durable=DURABLE,
            stream=self._subjects.outbox_stream,
            config=config,
        )

    async def store(self, msgs: Sequence[Msg]) -> bool:
        """Store one fetched batch (and the waiting records now due); True if it was committed
        and acknowledged."""
        rows: list[tuple[UsageRow, Msg]] = []
        delivered: list[str] = []
        acks: list[Msg] = []
        for msg in msgs:
            try:
                record = envelopes.decode_outbox(msg.data)
            except msgspec.DecodeError as exc:
                undecodable("outbox", msg.subject, exc)
                await msg.term()  # redelivered, it would be as unreadable
                continue
            if isinstance(record, Delivered):
                delivered += record.uids
                acks.append(msg)
                continue
            problem = problem_of(record)
            if problem is not None:
                log.error(
                    "outbox record %s (request %s) invalid, dropped: %s",
                    record.uid,
                    record.request_id,
                    problem,
                )
                await msg.term()
                continue
            rows.append((self._row_for(record), msg))
        flush, self._flush = self._flush, False
        batch = self._pairing.round(rows, delivered, asyncio.get_running_loop().time(), flush)
        acks += batch.tokens
        if not acks:
            return True
        traced = spans.records(batch.rows, batch.tokens) if tracing.ENABLED else None
        try:
            stored = await self._write(batch.rows) if batch.rows else {}
            inserted = [uid for uid, s in stored.items() if s.inserted]
            await self._confirm(batch.late(inserted))
        except Exception as exc:
            metrics.DRAIN_FAILURES.inc()
            log.warning("storing %d outbox messages failed, will retry: %r", len(acks), exc)
            if traced:
                spans.end_records(traced, type(exc).__name__)
            for msg in acks:
                await msg.nak(delay=RETRY_DELAY)
            await asyncio.sleep(RETRY_DELAY)
            return False
        try:
            for msg in acks:  # committed: from now on a redelivery is only a duplicate
                await msg.ack()
        finally:
            if traced:
                spans.end_records(traced, "")
        _observe_delays(batch.tokens, time.time())
        self.drained += len(batch.rows)
        metrics.DRAINED.inc(len(batch.rows))
        log.info(
            "stored %d records (%d confirmed with them) and %d other deliveries from the outbox",
            len(batch.rows),
            len(batch.matched),
            len(batch.unmatched),
        )
        return True


def _observe_delays(msgs: Sequence[Msg], now: float) -> None:
    """How long each stored record waited in the outbox: JetStream's store time to our commit."""
    for msg in msgs:  # the stored time travels in the message's ack subject
        metrics.OUTBOX_STORE_DELAY.observe(max(now - stored_at(msg.reply), 0.0))


_V1_TOKENS = 9  # $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ns>.<pending>


def stored_at(reply: str) -> float:
    """JetStream's store time (Unix seconds) of a message, from its ack subject: the field
    nats-py's ``Msg.metadata`` reads, without the dataclass and datetime it builds (3 µs a
    message, at every record). The v2 form adds a domain and an account hash before the stream;
    nats-py's ``Msg.Ack.Timestamp`` is its index there."""
    tokens = reply.split(".")
    ns = tokens[7] if len(tokens) == _V1_TOKENS else tokens[Msg.Ack.Timestamp]
    return int(ns) / 1e9
