"""Usage records made durable before the final event: the JetStream outbox first, billing's
request/reply when JetStream cannot take them (the rule: ``ezat_common.settlement``, carried out
by ``ezat_common.settling``; docs/billing.md).

``publish_held`` is the usual path (docs/performance.md): the record goes to the outbox with its
PubAck addressed to the edge that holds the final reply (``bus.ack_subject_of`` the edge's reply
subject), and the final reply leaves at once carrying the record, so the edge settles it. The
router then waits for nothing: one NATS hop and one wake-up less on the way to the final event.

``record`` settles a record here, for a final reply no edge holds (no edge reply subject, or the
outbox publish failed): the outbox's PubAck (~0.6 ms p50, where a PostgreSQL commit measured
~7 ms p50 on this machine kind), else billing's request/reply with the time left, all within
``DURABLE_DEADLINE`` (2 s); past it the request is reported failed and not charged.

``record_later`` is for records nobody waits on (client gone, request failed): a ``client_closed``
record is billable, so it is not given up after one bounded attempt. It is retried with backoff
(``RETRY_FIRST`` doubling to ``RETRY_MAX``) for up to ``RETRY_FOR``; every attempt is idempotent on
the record's uid (outbox de-duplication, ``ON CONFLICT`` in billing). At shutdown ``drain`` retries
the pending ones at once and keeps trying for its grace period; the uid of every record still not
durable then is logged at error level.
"""

from __future__ import annotations

import asyncio
import logging

from ezat_common import envelopes
from ezat_common.envelopes import UsageRecord
from ezat_common.outbox import Outbox
from ezat_common.settlement import ACK_TIMEOUT, DURABLE_DEADLINE, Settlement
from ezat_common.settling import PutAck, Settler
from ezat_common.subjects import Subjects
from nats.aio.client import Client

# Fire-and-forget records: first retry delay, largest delay, and how long they are retried.
RETRY_FIRST = 0.5
RETRY_MAX = 10.0
RETRY_FOR = 600.0
# While stopping, the pending records are retried at least this often.
STOPPING_RETRY = 0.25

log = logging.getLogger("ezat.router.billing")


class UsageSink:
    def __init__(
        self,
        nc: Client,
        subjects: Subjects,
        deadline: float = DURABLE_DEADLINE,
        outbox_timeout: float = ACK_TIMEOUT,
        *,
        outbox: Outbox | None = None,
        retry_first: float = RETRY_FIRST,
        retry_max: float = RETRY_MAX,
        retry_for: float = RETRY_FOR,
    ) -> None:
        self._settler = Settler(nc, subjects)
        self._deadline = deadline
        self._outbox_timeout = min(outbox_timeout, deadline)
        self._outbox = outbox if outbox is not None else Outbox(nc, subjects)
        self._retry_first = retry_first
        self._retry_max = retry_max
        self._retry_for = retry_for
        # Fire-and-forget records not yet durable, with the record each task carries.
        self._pending: dict[asyncio.Task[bool], UsageRecord] = {}
        # Set at shutdown: sleeping retries wake up (``_sleepers``) and retry without backoff.
        self._stopping = False
        self._sleepers: set[asyncio.Future[None]] = set()

    async def record(self, rec: UsageRecord, traceparent: str | None = None) -> bool:
        """True once the record is durable (the outbox or PostgreSQL); False on any failure.
        ``traceparent`` (the routing span's) rides on the outbox put and on the request to
        billing, as with ``publish_held``."""
        data = envelopes.encode(rec)
        s = Settlement(self._outbox_timeout, self._deadline)
        decision = s.final(asyncio.get_running_loop().time())
        acks = PutAck(self._outbox, rec.uid, data, traceparent)
        fields: dict[str, object] = {"status": rec.status, "uid": rec.uid}
        return await self._settler.run(s, decision, data, acks, fields, traceparent)

    async def publish_held(
        self, rec: UsageRecord, ack_to: str, traceparent: str | None = None
    ) -> bytes | None:
        """Send the record to the outbox with its PubAck addressed to ``ack_to`` (the process that
        holds the final reply) without waiting; the encoded record, or None if it could not be
        sent (then the caller falls back to ``record``). ``traceparent`` (the routing span's)
        rides in its headers, for billing's span."""
        data = envelopes.encode(rec)
        timeout = self._outbox_timeout
        if await self._outbox.publish(rec.uid, data, ack_to, timeout, traceparent):
            return data
        return None

    def record_later(self, rec: UsageRecord, traceparent: str | None = None) -> None:
        """Make ``rec`` durable in the background, retrying until it is (or ``retry_for``)."""
        task = asyncio.get_running_loop().create_task(self._record_until_durable(rec, traceparent))
        self._pending[task] = rec
        task.add_done_callback(self._done)

    @property
    def pending(self) -> int:
        return len(self._pending)

    def _done(self, task: asyncio.Task[bool]) -> None:
        self._pending.pop(task, None)

    async def _record_until_durable(self, rec: UsageRecord, traceparent: str | None) -> bool:
        loop = asyncio.get_running_loop()
        give_up = loop.time() + self._retry_for
        delay = self._retry_first
        attempts = 0
        while True:
            attempts += 1
            if await self.record(rec, traceparent):
                if attempts > 1:
                    log.info(
                        "usage made durable after %d attempts",
                        attempts,
                        extra={"fields": {"uid": rec.uid}},
                    )
                return True
            if self._stopping:
                delay = min(delay, STOPPING_RETRY)
            if loop.time() + delay > give_up:
                log.error(
                    "usage record lost: not durable after %d attempts over %gs",
                    attempts,
                    self._retry_for,
                    extra={"fields": _lost_fields(rec)},
                )
                return False
            await self._pause(delay)
            delay = min(delay * 2, self._retry_max)

    async def _pause(self, delay: float) -> None:
        """Sleep ``delay`` seconds, or until shutdown begins."""
        loop = asyncio.get_running_loop()
        wake: asyncio.Future[None] = loop.create_future()
        timer = loop.call_later(delay, _wake, wake)
        self._sleepers.add(wake)
        try:
            await wake
        finally:
            timer.cancel()
            self._sleepers.discard(wake)

    async def drain(self, timeout: float) -> None:
        """At shutdown: retry the pending records now, for up to ``timeout`` seconds; log (at
        error level) and abandon whatever is still not durable after that."""
        self._stopping = True
        for wake in list(self._sleepers):
            _wake(wake)
        if not self._pending:
            return
        _, left = await asyncio.wait(set(self._pending), timeout=timeout)
        for task in left:
            rec = self._pending.get(task)
            task.cancel()
            if rec is not None:
                log.error(
                    "usage record not durable at shutdown, lost unless an attempt in flight "
                    "stored it",
                    extra={"fields": _lost_fields(rec)},
                )
        if left:
            await asyncio.wait(left, timeout=1.0)


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def _lost_fields(rec: UsageRecord) -> dict[str, object]:
    return {
        "uid": rec.uid,
        "request_id": rec.request_id,
        "key_id": rec.key_id,
        "status": rec.status,
        "input_tokens": rec.input_tokens,
        "output_tokens": rec.output_tokens,
    }
