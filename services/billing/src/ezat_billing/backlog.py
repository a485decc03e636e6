"""The usage outbox's backlog as gauges: how many messages it holds and how old the oldest is.

One billing task reads the stream's info every ``READ_EVERY`` seconds (never per request), each
reading bounded by ``READ_TIMEOUT``. Work-queue retention removes a message once billing stored
and acknowledged it, so the stream's message count is what is not yet in PostgreSQL (records
and delivery confirmations, including the few the drain holds for pairing), and its first
message is the oldest of them. The stream info's ``first_ts`` gives that message's store time in
the same reply (nats-py's ``StreamState`` drops the field, hence the JetStream API request here;
fetching the message instead would cost a second request and a permission billing lacks in
deploy/k8s). The age is computed when scraped from the last reading, so it keeps growing while
JetStream does not answer.
"""

from __future__ import annotations

import datetime
import logging
import time

import msgspec
import nats.errors
from ezat_common.subjects import Subjects
from msgspec import Struct
from nats.aio.client import Client

from . import metrics

log = logging.getLogger("ezat.billing.backlog")

READ_EVERY = 2.0
READ_TIMEOUT = 1.0
_STREAM_INFO = "$JS.API.STREAM.INFO."  # JetStream's API (the client's default prefix)
_NOT_FOUND = 404


class _State(Struct):
    messages: int = 0
    first_ts: datetime.datetime | None = None


class _Error(Struct):
    code: int = 0
    description: str = ""


class _StreamInfo(Struct):
    """The parts of JetStream's stream info reply (JSON) read here."""

    state: _State | None = None
    error: _Error | None = None


_decode_info = msgspec.json.Decoder(_StreamInfo).decode


class Backlog:
    """The last reading of the outbox; ``read`` refreshes it and the gauges."""

    def __init__(self, nc: Client, subjects: Subjects) -> None:
        self._nc = nc
        self._subject = _STREAM_INFO + subjects.outbox_stream
        self.messages = 0
        self.oldest: float | None = None  # store time (Unix seconds) of the oldest message
        self._failing = False
        metrics.OUTBOX_OLDEST_AGE.set_function(self.age)

    def age(self) -> float:
        """Seconds since the oldest message the outbox held at the last reading was stored."""
        return 0.0 if self.oldest is None else max(time.time() - self.oldest, 0.0)

    async def read(self) -> None:
        """One reading; on failure the last one stands (logged once per outage)."""
        try:
            reply = await self._nc.request(self._subject, b"", timeout=READ_TIMEOUT)
            info = _decode_info(reply.data)
        except (nats.errors.Error, TimeoutError, OSError, msgspec.DecodeError) as exc:
            self._failed(repr(exc))
            return
        if info.error is not None and info.error.code != _NOT_FOUND:
            self._failed(info.error.description)
            return
        # No stream yet (nothing was ever published) reads as an empty one.
        state = info.state or _State()
        self.messages = state.messages
        self.oldest = (
            state.first_ts.timestamp() if state.messages and state.first_ts is not None else None
        )
        metrics.OUTBOX_MESSAGES.set(self.messages)
        if self._failing:
            log.info("usage outbox backlog readable again")
            self._failing = False

    def _failed(self, why: str) -> None:
        level = logging.DEBUG if self._failing else logging.WARNING
        log.log(level, "usage outbox backlog unknown: %s", why)
        self._failing = True
