"""Usage records to billing: request/reply first, the JetStream outbox when that cannot answer.

``record`` returns True once the record is durable, which is what releases the final event
(SPEC §6). The fast path is billing's request/reply (a PostgreSQL group commit behind it; billing
itself falls back to the outbox when PostgreSQL is slow or down). When billing does not answer
(no replica, a replica killed, a timeout), the router publishes the same bytes to the outbox
stream with ``Nats-Msg-Id`` = request id and waits for JetStream's PubAck; billing drains the
stream later, idempotently. Everything is bounded by ``DEADLINE``: past it the request is
reported failed and not charged. An explicit ``ok=false`` from billing (an invalid record, or
billing could not reach the outbox either) is final. See docs/billing.md.

``record_later`` is the same, fire-and-forget, for records nobody waits on (client gone,
request failed), tracked so shutdown can let them finish.
"""

from __future__ import annotations

import asyncio
import logging

import msgspec
import nats.errors
from ezat_common import envelopes
from ezat_common.bus import is_no_responders
from ezat_common.envelopes import UsageRecord
from ezat_common.outbox import Outbox
from ezat_common.subjects import Subjects
from nats.aio.client import Client

# The whole budget of one record, and the part of it given to billing's own answer: billing
# answers within ~1.2 s (0.8 s PostgreSQL + its own outbox attempt), the rest is our outbox try.
DEADLINE = 2.0
FAST_PATH_TIMEOUT = 1.3

log = logging.getLogger("ezat.router.billing")


class Billing:
    def __init__(
        self,
        nc: Client,
        subjects: Subjects,
        deadline: float = DEADLINE,
        fast_path_timeout: float = FAST_PATH_TIMEOUT,
    ) -> None:
        self._nc = nc
        self._subject = subjects.usage_record
        self._deadline = deadline
        self._fast = min(fast_path_timeout, deadline)
        self._outbox = Outbox(nc, subjects)
        self._pending: set[asyncio.Task[bool]] = set()

    async def record(self, rec: UsageRecord) -> bool:
        """True once the record is durable (PostgreSQL or the outbox); False on any failure."""
        loop = asyncio.get_running_loop()
        end = loop.time() + self._deadline
        data = envelopes.encode(rec)
        fields = {"status": rec.status}
        try:
            msg = await self._nc.request(self._subject, data, timeout=self._fast)
            if not is_no_responders(msg):
                ack = envelopes.decode_usage_ack(msg.data)
                if not ack.ok:
                    log.warning("usage refused by billing: %s", ack.error, extra={"fields": fields})
                return bool(ack.ok)
        except (nats.errors.Error, TimeoutError):
            pass  # no billing replica, or none answered in time: the outbox takes the record
        except (msgspec.DecodeError, msgspec.ValidationError):
            log.warning("unreadable usage acknowledgement", extra={"fields": fields})
        left = end - loop.time()
        if left > 0 and await self._outbox.put(rec.request_id, data, timeout=left):
            log.info("usage record sent to the outbox", extra={"fields": fields})
            return True
        log.warning("usage not made durable", extra={"fields": fields})
        return False

    def record_later(self, rec: UsageRecord) -> None:
        task = asyncio.get_running_loop().create_task(self.record(rec))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def drain(self, timeout: float) -> None:
        if self._pending:
            await asyncio.wait(set(self._pending), timeout=timeout)
