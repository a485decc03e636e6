"""Usage records to billing over NATS request/reply.

``record`` waits for billing's acknowledgement that the record is durable (what releases the
final event); ``record_later`` is fire-and-forget for records nobody waits on (client gone,
request failed), with the same timeout, tracked so shutdown can let them finish.
"""

from __future__ import annotations

import asyncio
import logging

import msgspec
import nats.errors
from ezat_common import envelopes
from ezat_common.bus import is_no_responders
from ezat_common.envelopes import UsageRecord
from ezat_common.subjects import Subjects
from nats.aio.client import Client

ACK_TIMEOUT = 2.5

log = logging.getLogger("ezat.router.billing")


class Billing:
    def __init__(self, nc: Client, subjects: Subjects, timeout: float = ACK_TIMEOUT) -> None:
        self._nc = nc
        self._subject = subjects.usage_record
        self._timeout = timeout
        self._pending: set[asyncio.Task[bool]] = set()

    async def record(self, rec: UsageRecord) -> bool:
        """True once billing acknowledged the record as durable; False on any failure."""
        try:
            msg = await self._nc.request(
                self._subject, envelopes.encode(rec), timeout=self._timeout
            )
            if is_no_responders(msg):
                return False
            ack = envelopes.decode_usage_ack(msg.data)
        except (nats.errors.Error, TimeoutError, msgspec.DecodeError, msgspec.ValidationError):
            log.warning("usage not acknowledged", extra={"fields": {"status": rec.status}})
            return False
        return bool(ack.ok)

    def record_later(self, rec: UsageRecord) -> None:
        task = asyncio.get_running_loop().create_task(self.record(rec))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def drain(self, timeout: float) -> None:
        if self._pending:
            await asyncio.wait(set(self._pending), timeout=timeout)
