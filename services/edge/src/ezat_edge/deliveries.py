"""The edge's confirmations that a request's final event reached its client (docs/billing.md,
"Billed only when delivered").

``add`` is all the request path pays: one list append once the final event (``message_stop``,
``[DONE]``, the JSON body) was written, or once the client left (an early close is billed as the
router records it). A task publishes what gathered every ``FLUSH_INTERVAL`` as one ``Delivered``
message to the usage outbox, where billing drains it beside the records; a batch JetStream does
not confirm is sent again (same message id, so a retry is stored once) for ``RETRY_FOR`` seconds,
well inside billing's confirmation window. Whatever is pending is sent at shutdown. A process
killed with SIGKILL loses its last ``FLUSH_INTERVAL`` of confirmations: those records are settled
as undelivered (not charged).
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from ezat_common import bus, envelopes
from ezat_common.periodic import Periodic
from ezat_common.subjects import Subjects
from nats.js.api import Header

log = logging.getLogger("ezat.edge.deliveries")

FLUSH_INTERVAL = 0.1
RETRY_FOR = 20.0
PUBLISH_TIMEOUT = 2.0
# Past this many unsent confirmations (NATS away for long) the oldest are dropped, and their
# records settled as undelivered: memory stays bounded, and the error is logged.
MAX_PENDING = 200_000


class Deliveries:
    def __init__(self, nc: bus.Client, subjects: Subjects) -> None:
        self._nc = nc
        self._subjects = subjects
        self._pending: list[str] = []
        self._flusher = Periodic("deliveries", FLUSH_INTERVAL, self.flush)

    def add(self, uid: str) -> None:
        self._pending.append(uid)

    def start(self) -> None:
        self._flusher.start()

    async def stop(self) -> None:
        await self._flusher.stop()
        await self.flush(retry_for=PUBLISH_TIMEOUT)

    async def flush(self, retry_for: float = RETRY_FOR) -> bool:
        """Send what is pending; False if JetStream never confirmed it (then it is dropped)."""
        if not self._pending:
            return True
        uids, self._pending = self._pending, []
        data = envelopes.encode(envelopes.Delivered(uids=uids))
        headers = {Header.MSG_ID.value: f"delivered-{uuid.uuid4().hex}"}
        loop = asyncio.get_running_loop()
        give_up = loop.time() + retry_for
        delay = 0.1
        while True:
            try:
                await self._nc.jetstream().publish(
                    self._subjects.usage_outbox,
                    data,
                    timeout=PUBLISH_TIMEOUT,
                    stream=self._subjects.outbox_stream,
                    headers=headers,
                )
                return True
            except Exception as exc:
                if loop.time() + delay >= give_up:
                    log.error(
                        "%d delivery confirmations not stored; their records will be settled "
                        "as undelivered: %r",
                        len(uids),
                        exc,
                    )
                    return False
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
                # Keep memory bounded while NATS is away.
                if len(self._pending) > MAX_PENDING:
                    dropped = len(self._pending) - MAX_PENDING
                    del self._pending[:dropped]
                    log.error("%d delivery confirmations dropped (NATS away)", dropped)
