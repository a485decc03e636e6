"""The usage outbox's backlog as gauges: how many messages it holds and how old the oldest is.

One billing task reads the stream's info every ``READ_EVERY`` seconds (never per request), each
reading bounded by ``READ_TIMEOUT``. Work-queue retention removes a message once billing stored
and acknowledged it, so the stream's message count is what is not yet in PostgreSQL (records
and delivery confirmations, including the few the drain holds for pairing), and its first
message is the oldest of them (``ezat_common.outbox.backlog``, which the drain point of
settling reads too). The age is computed when scraped from the last reading, so it keeps
growing while JetStream does not answer.
"""

from __future__ import annotations

import logging
import time

from ezat_common.outbox import BacklogUnknown, backlog
from ezat_common.subjects import Subjects
from nats.aio.client import Client

from . import metrics

log = logging.getLogger("ezat.billing.backlog")

READ_EVERY = 2.0
READ_TIMEOUT = 1.0


class Backlog:
    """The last reading of the outbox; ``read`` refreshes it and the gauges."""

    def __init__(self, nc: Client, subjects: Subjects) -> None:
        self._nc = nc
        self._subjects = subjects
        self.messages = 0
        self.oldest: float | None = None  # store time (Unix seconds) of the oldest message
        self._failing = False
        self._read_once = False
        metrics.OUTBOX_OLDEST_AGE.set_function(self.age)

    @property
    def readable(self) -> bool:
        """The last reading succeeded: JetStream answers for the outbox (billing's readiness)."""
        return self._read_once and not self._failing

    def age(self) -> float:
        """Seconds since the oldest message the outbox held at the last reading was stored."""
        return 0.0 if self.oldest is None else max(time.time() - self.oldest, 0.0)

    async def read(self) -> None:
        """One reading; on failure the last one stands (logged once per outage)."""
        try:
            state = await backlog(self._nc, self._subjects, READ_TIMEOUT)
        except BacklogUnknown as exc:
            self._failed(str(exc))
            return
        self._read_once = True
        self.messages = state.messages
        self.oldest = state.oldest()
        metrics.OUTBOX_MESSAGES.set(self.messages)
        if self._failing:
            log.info("usage outbox backlog readable again")
            self._failing = False

    def _failed(self, why: str) -> None:
        level = logging.DEBUG if self._failing else logging.WARNING
        log.log(level, "usage outbox backlog unknown: %s", why)
        self._failing = True
