"""Reply inboxes: one wildcard subscription per process, a queue per request. Re-exported by
``bus`` (``bus.Inbox``, ``bus.ack_subject_of``).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from typing import Any

from nats.aio.client import Client
from nats.aio.msg import Msg

from .exchange import Tick
from .subjects import Subjects

# The logger of ``bus``, which these lived in: its configuration and log lines stay as they were.
log = logging.getLogger("ezat.bus")

# First letter of an inbox token that carries acknowledgements (request tokens are digits).
ACK = "a"


class Inbox:
    """One wildcard subscription per process; each request gets its own queue by sequence number.

    Cheaper than a subscription per request, and replies for a request that has gone away are
    dropped instead of piling up.
    """

    def __init__(self, nc: Client, subjects: Subjects, instance: str) -> None:
        self._nc = nc
        self._prefix = subjects.inbox(instance)
        self._ack_prefix = f"{self._prefix}.{ACK}"
        self._seq = itertools.count(1)
        self._queues: dict[str, asyncio.Queue[Msg] | asyncio.Queue[Msg | Tick]] = {}
        self._sub: Any = None

    async def start(self) -> None:
        self._sub = await self._nc.subscribe(self._prefix + ".*", cb=self._on_msg)

    async def _on_msg(self, msg: Msg) -> None:
        token = msg.subject.rsplit(".", 1)[-1]
        queue = self._queues.get(token)
        if queue is not None:
            queue.put_nowait(msg)

    def open(self) -> tuple[str, str, asyncio.Queue[Msg]]:
        queue: asyncio.Queue[Msg] = asyncio.Queue()
        token, subject = self.attach(queue)
        return token, subject, queue

    def attach(self, queue: asyncio.Queue[Msg] | asyncio.Queue[Msg | Tick]) -> tuple[str, str]:
        """A token and reply subject for ``queue``: a relay's queue also holds its driver's
        ``Tick``s (exchange.py)."""
        token = str(next(self._seq))
        self._queues[token] = queue
        # The request's acknowledgement subject (``ack_subject``) feeds the same queue.
        self._queues[ACK + token] = queue
        return token, f"{self._prefix}.{token}"

    def ack_subject(self, token: str) -> str:
        """Where the usage outbox acknowledges this request's record (``ack_subject_of`` its
        reply subject); its messages arrive in the request's queue, told apart by ``is_ack``."""
        return self._ack_prefix + token

    def is_ack(self, msg: Msg) -> bool:
        # Asked of every reply a request receives: one prefix test, no split.
        return msg.subject.startswith(self._ack_prefix)

    def close(self, token: str) -> None:
        self._queues.pop(token, None)
        self._queues.pop(ACK + token, None)

    async def stop(self) -> None:
        """Unsubscribe (an inbox of one request's lifetime, e.g. its image downloads)."""
        self._queues.clear()
        if self._sub is not None:
            try:
                await self._sub.unsubscribe()
            except Exception as exc:  # the connection is gone; so is the subscription
                log.debug("inbox not unsubscribed: %s", type(exc).__name__)
            self._sub = None


def ack_subject_of(reply_subject: str) -> str:
    """The acknowledgement subject of an inbox reply subject (``Inbox.open``): where the router
    has the outbox acknowledge a request's usage record to the edge that holds its final reply
    (docs/billing.md). Derived, so no envelope carries it."""
    prefix, _, token = reply_subject.rpartition(".")
    return f"{prefix}.{ACK}{token}"
