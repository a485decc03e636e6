"""The usage outbox: a JetStream stream where a usage record is made durable when the billing
request/reply cannot confirm it (billing down or slow, PostgreSQL down).

File storage, work-queue retention (a message is gone once billing acked it after its commit), and
de-duplication on ``Nats-Msg-Id`` = the request's identity (``envelopes.identity``: its uid, never
the client-chosen request id alone), so the router and billing publishing the same record, or one of
them retrying, leaves one message, and two requests sharing a request id leave two. A ``PubAck``
means the server stored it. Billing drains the stream into PostgreSQL (``INSERT … ON CONFLICT DO
NOTHING``).
"""

from __future__ import annotations

import asyncio
import logging

import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.js.api import DiscardPolicy, RetentionPolicy, StorageType, StreamConfig

from .subjects import Subjects

log = logging.getLogger("ezat.outbox")

DUPLICATE_WINDOW = 15 * 60.0  # seconds: longer than any retry of one record
MAX_AGE = 14 * 24 * 3600.0  # an outage longer than two weeks needs an operator anyway
MSG_ID = "Nats-Msg-Id"


def stream_config(subjects: Subjects) -> StreamConfig:
    return StreamConfig(
        name=subjects.outbox_stream,
        subjects=[subjects.usage_outbox],
        storage=StorageType.FILE,
        retention=RetentionPolicy.WORK_QUEUE,
        discard=DiscardPolicy.NEW,  # when full, refuse new records (-> client error), never drop
        duplicate_window=DUPLICATE_WINDOW,
        max_age=MAX_AGE,
        num_replicas=1,
    )


class Outbox:
    """Publisher side: ``put`` returns True once JetStream acknowledged the record as stored."""

    def __init__(self, nc: Client, subjects: Subjects) -> None:
        self._nc = nc
        self._subjects = subjects
        self._ready = False
        self._lock = asyncio.Lock()

    async def ensure_stream(self, timeout: float = 2.0) -> None:
        """Create the stream if it does not exist (idempotent; several replicas may race)."""
        if self._ready:
            return
        async with self._lock:
            if self._ready:
                return
            js = self._nc.jetstream(timeout=timeout)
            config = stream_config(self._subjects)
            try:
                await js.stream_info(self._subjects.outbox_stream)
            except nats.js.errors.NotFoundError:
                try:
                    await js.add_stream(config)
                except nats.js.errors.BadRequestError:
                    await js.stream_info(
                        self._subjects.outbox_stream
                    )  # created meanwhile by another process
            self._ready = True

    async def put(self, msg_id: str, data: bytes, timeout: float) -> bool:
        """Store the encoded ``UsageRecord`` under ``msg_id`` (its uid, the de-duplication key);
        False if JetStream did not confirm within timeout."""
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        try:
            async with asyncio.timeout(timeout):
                await self.ensure_stream(timeout)
                js = self._nc.jetstream()
                left = max(end - loop.time(), 0.01)
                ack = await js.publish(
                    self._subjects.usage_outbox,
                    data,
                    timeout=left,
                    stream=self._subjects.outbox_stream,
                    headers={MSG_ID: msg_id},
                )
        except (nats.errors.Error, TimeoutError, OSError) as exc:
            log.warning("usage outbox refused the record: %r", exc)
            return False
        return ack.stream == self._subjects.outbox_stream
