"""The usage outbox: a JetStream stream where a usage record is made durable when the billing
request/reply cannot confirm it (billing down or slow, PostgreSQL down).

File storage, work-queue retention (a message is gone once billing acked it after its commit), and
de-duplication on ``Nats-Msg-Id`` = the request's identity (``UsageRecord.uid``, never
the client-chosen request id alone), so the router and billing publishing the same record, or one of
them retrying, leaves one message, and two requests sharing a request id leave two. A ``PubAck``
means the server stored it. Billing drains the stream into PostgreSQL (``INSERT … ON CONFLICT DO
NOTHING``).

Two ways to wait for the ``PubAck``: ``put`` waits for it here; ``publish`` sends the record with
another process's reply subject and returns at once, and that process (the one holding the final
reply) checks the acknowledgement with ``acknowledged``. Either way, when the outbox does not
confirm, ``store_directly`` asks billing to store the record (request/reply, a PostgreSQL commit).

The stream has ``EZAT_JETSTREAM_REPLICAS`` replicas (3 on a 3-node cluster, so a node's death
loses no record); a stream found with another count is updated to it in the background
(``nats_env.reconcile_replicas``; docs/reliability.md, "A 3-node NATS cluster").
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
from collections.abc import Callable

import msgspec
import nats.errors
import nats.js.errors
from msgspec import Struct
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.api import DiscardPolicy, Header, RetentionPolicy, StorageType, StreamConfig

from . import envelopes, nats_env, tracing
from .subjects import Subjects
from .undecodable import undecodable

log = logging.getLogger("ezat.outbox")

DUPLICATE_WINDOW = 15 * 60.0  # seconds: longer than any retry of one record
MAX_AGE = 14 * 24 * 3600.0  # an outage longer than two weeks needs an operator anyway


class _PubAck(Struct):
    """The parts of JetStream's publish acknowledgement (JSON) that tell whether it stored it."""

    stream: str = ""
    seq: int = 0
    error: dict[str, object] | None = None


_decode_pub_ack = msgspec.json.Decoder(_PubAck).decode


def acknowledged(msg: Msg, stream: str) -> bool:
    """True if ``msg`` is JetStream's acknowledgement that ``stream`` stored the record (a first
    store or a duplicate of a stored one); False for an error, a no-responders status or junk."""
    if msg.headers and msg.headers.get("Status"):
        # A status message (503 "no responders"). NATS sends that only to the publisher's own
        # subscription, so a PubAck addressed to the edge never is one: a missing stream shows as
        # silence there. Checked anyway, for any other holder.
        return False
    try:
        ack = _decode_pub_ack(msg.data)
    except msgspec.DecodeError as exc:
        undecodable("pub_ack", msg.subject, exc)
        return False
    return ack.error is None and ack.stream == stream and ack.seq > 0


async def store_directly(
    nc: Client, subject: str, data: bytes, timeout: float, traceparent: str | None = None
) -> str | None:
    """Billing's request/reply for an encoded UsageRecord: None once billing stored it, else why
    not (billing down, silent past ``timeout``, or refusing the record). ``traceparent`` travels
    in the request's headers (none without one): billing's span is its child."""
    if timeout <= 0:
        return "no time left"
    try:
        msg = await nc.request(subject, data, timeout=timeout, headers=tracing.headers(traceparent))
    except nats.errors.NoRespondersError:
        return "no billing replica answers"
    except (nats.errors.Error, TimeoutError) as exc:
        return type(exc).__name__
    try:
        ack = envelopes.decode_usage_ack(msg.data)
    except msgspec.DecodeError as exc:
        undecodable("usage_ack", msg.subject, exc)
        return type(exc).__name__
    return None if ack.ok else f"refused: {ack.error}"


def stream_config(subjects: Subjects, replicas: int = 1) -> StreamConfig:
    return StreamConfig(
        name=subjects.outbox_stream,
        subjects=[subjects.usage_outbox],
        storage=StorageType.FILE,
        retention=RetentionPolicy.WORK_QUEUE,
        discard=DiscardPolicy.NEW,  # when full, refuse new records (-> client error), never drop
        duplicate_window=DUPLICATE_WINDOW,
        max_age=MAX_AGE,
        num_replicas=replicas,
    )


class Outbox:
    """Publisher side: ``put`` returns True once JetStream acknowledged the record as stored."""

    def __init__(self, nc: Client, subjects: Subjects, replicas: int | None = None) -> None:
        self._nc = nc
        self._subjects = subjects
        self._replicas = nats_env.replicas() if replicas is None else replicas
        self._ready = False
        self._lock = asyncio.Lock()
        self._reconcile: asyncio.Task[bool] | None = None

    async def ensure_stream(self, timeout: float = 2.0) -> None:
        """Create the stream if it does not exist (idempotent; several replicas may race)."""
        if self._ready:
            return
        async with self._lock:
            if self._ready:
                return
            js = self._nc.jetstream(timeout=timeout)
            config = stream_config(self._subjects, self._replicas)
            try:
                info = await js.stream_info(self._subjects.outbox_stream)
            except nats.js.errors.NotFoundError:
                try:
                    await js.add_stream(config)
                except nats.js.errors.BadRequestError:
                    await js.stream_info(
                        self._subjects.outbox_stream
                    )  # created meanwhile by another process
            else:
                if info.config.num_replicas != self._replicas:
                    # Made before with another count: moved in the background; the stream
                    # takes records meanwhile.
                    self._reconcile = asyncio.create_task(
                        nats_env.reconcile_replicas(
                            js, self._subjects.outbox_stream, self._replicas
                        )
                    )
            self._ready = True

    async def publish(
        self, msg_id: str, data: bytes, reply: str, timeout: float, traceparent: str | None = None
    ) -> bool:
        """Send the record with ``reply`` as the subject of its PubAck and return at once; False
        if it could not even be sent (stream not ensured, connection down). ``traceparent``
        travels in its headers (JetStream keeps them): billing's span is its child."""
        try:
            if not self._ready:
                async with asyncio.timeout(timeout):
                    await self.ensure_stream(timeout)
            headers = {
                Header.MSG_ID.value: msg_id,
                Header.EXPECTED_STREAM.value: self._subjects.outbox_stream,
            }
            if traceparent:
                headers[tracing.HEADER] = traceparent
            await self._nc.publish(self._subjects.usage_outbox, data, reply, headers)
        except (nats.errors.Error, TimeoutError, OSError) as exc:
            log.warning("usage outbox publish failed: %r", exc)
            return False
        return True

    async def put(
        self, msg_id: str, data: bytes, timeout: float, traceparent: str | None = None
    ) -> bool:
        """Store the encoded ``UsageRecord`` under ``msg_id`` (its uid, the de-duplication key);
        False if JetStream did not confirm within timeout. ``traceparent`` travels in its headers,
        as with ``publish``."""
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        headers = {Header.MSG_ID.value: msg_id}
        if traceparent:
            headers[tracing.HEADER] = traceparent
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
                    headers=headers,
                )
        except (nats.errors.Error, TimeoutError, OSError) as exc:
            log.warning("usage outbox refused the record: %r", exc)
            return False
        return ack.stream == self._subjects.outbox_stream


BARRIER_TIMEOUT = 1.0


async def wait_drained(
    nc: Client,
    subjects: Subjects,
    timeout: float = BARRIER_TIMEOUT,
    nudge: Callable[[], None] | None = None,
) -> bool:
    """A read barrier: wait until every message the outbox held when called has been drained into
    PostgreSQL (work-queue retention removes a message once billing acknowledged it after its
    commit). True when done, False past ``timeout`` (billing or PostgreSQL down: the caller reads
    what is stored). ``nudge`` asks the drain to fetch now instead of after its linger."""
    js = nc.jetstream(timeout=timeout)
    loop = asyncio.get_running_loop()
    give_up = loop.time() + timeout
    try:
        info = await js.stream_info(subjects.outbox_stream)
        target = info.state.last_seq
        while info.state.messages and info.state.first_seq <= target:
            if nudge is not None:
                nudge()
            if loop.time() >= give_up:
                return False
            await asyncio.sleep(0.005)
            info = await js.stream_info(subjects.outbox_stream)
    except (nats.errors.Error, TimeoutError, OSError) as exc:
        log.info("outbox read barrier skipped: %r", exc)
        return False
    return True


# ---- the stream's state ------------------------------------------------------------------------
# JetStream's stream-info reply read directly: nats-py's ``StreamState`` drops ``first_ts``, the
# store time of the oldest message, which is all the drain point and the backlog gauges need (one
# request, and no message-get permission, which billing does not have in deploy/k8s).

_STREAM_INFO = "$JS.API.STREAM.INFO."  # JetStream's API under the client's default prefix
_NOT_FOUND = 404


class BacklogState(Struct):
    """How many messages the outbox holds, and when the oldest of them was stored."""

    messages: int = 0
    first_ts: datetime.datetime | None = None

    def oldest(self) -> float | None:
        """The oldest message's store time (Unix seconds), or None when there is none."""
        return self.first_ts.timestamp() if self.messages and self.first_ts else None


class _ApiError(Struct):
    code: int = 0
    description: str = ""


class _StreamInfo(Struct):
    state: BacklogState | None = None
    error: _ApiError | None = None


_decode_info = msgspec.json.Decoder(_StreamInfo).decode


class BacklogUnknown(Exception):
    """JetStream did not say (no answer, an error, an unreadable reply)."""


async def backlog(nc: Client, subjects: Subjects, timeout: float) -> BacklogState:
    """The outbox's state now; a stream not created yet (nothing published) reads as empty."""
    try:
        reply = await nc.request(_STREAM_INFO + subjects.outbox_stream, b"", timeout=timeout)
        info = _decode_info(reply.data)
    except (nats.errors.Error, TimeoutError, OSError, msgspec.DecodeError) as exc:
        raise BacklogUnknown(repr(exc)) from None
    if info.error is not None and info.error.code != _NOT_FOUND:
        raise BacklogUnknown(info.error.description)
    return info.state or BacklogState()


async def drained_before(nc: Client, subjects: Subjects, timeout: float = 2.0) -> float | None:
    """A time (Unix seconds) before which everything published to the outbox has been drained
    into PostgreSQL: the store time of the oldest message the stream still holds (work-queue
    retention removes a message once billing acknowledged it after its commit), or the time of
    asking when it holds none. None when JetStream does not answer. Billing settles a record only
    once the confirmations published within its window are past this point (docs/billing.md).
    The oldest message seen may be acknowledged a moment later: its time is then earlier than
    the true point, which only delays settling."""
    asked = time.time()
    try:
        state = await backlog(nc, subjects, timeout)
    except BacklogUnknown as exc:
        log.info("outbox backlog unknown: %s", exc)
        return None
    oldest = state.oldest()
    return asked if oldest is None else oldest
