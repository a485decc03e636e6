"""NATS callbacks: decode, hand the request to the router in its own task, track it for cancel.

A subscription's callback runs messages one at a time, so ``on_route`` only decodes and spawns.
Tasks are kept by the request's identity (its gateway-made ``uid``; decoding puts the
client-chosen ``request_id`` there for producers that send no uid), never by the request id
alone: a client may reuse its ``x-request-id`` and two tenants may pick the same one, and a
cancel (broadcast to every replica) must only ever stop the one request it is about.

A cancel can overtake its request on the way (the client left while the translator was still
working); recently cancelled identities are remembered for ``CANCEL_MEMORY_SECONDS`` so that
request is dropped when it arrives. Past that the request arrives too late to matter, and the
memory must not drop a later request that happens to share a (uid-less) id.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable

from ezat_common import envelopes, tracing
from ezat_common.liveness import Heartbeats
from ezat_common.undecodable import decoded
from nats.aio.msg import Msg

from .routing import Router

log = logging.getLogger("ezat.router")

# Cancels for requests this replica does not (yet) run; bounded, oldest forgotten first, and
# forgotten anyway after CANCEL_MEMORY_SECONDS.
REMEMBERED_CANCELS = 4096
CANCEL_MEMORY_SECONDS = 30.0


class Handlers:
    def __init__(
        self,
        router: Router,
        beats: Heartbeats | None = None,
        clock: Callable[[], float] = time.monotonic,
        cancel_memory: float = CANCEL_MEMORY_SECONDS,
    ) -> None:
        self._router = router
        # While a request runs here its reply subject hears from us (docs/reliability.md): the
        # receiver takes our silence for our death.
        self._beats = beats
        self._clock = clock
        self._cancel_memory = cancel_memory
        # In-flight requests by identity (uid, or request id from uid-less producers).
        self.tasks: dict[str, asyncio.Task[None]] = {}
        # Remembered cancels: identity -> when the memory of it expires (clock time).
        self._cancelled: OrderedDict[str, float] = OrderedDict()

    async def on_route(self, msg: Msg) -> None:
        req = decoded(envelopes.decode_route_request, "route_request", msg)
        if req is None:
            return
        key = req.uid
        self._expire_cancels()
        if self._cancelled.pop(key, None) is not None:
            return  # the client is already gone
        routed = self._router.route(req, tracing.received(msg.headers))
        task = asyncio.get_running_loop().create_task(routed)
        self.tasks[key] = task
        if self._beats is not None:
            self._beats.open(req.reply_to, req.stream)
        reply_to = req.reply_to
        task.add_done_callback(lambda done: self._forget(key, done, reply_to))

    async def on_cancel(self, msg: Msg) -> None:
        cancel = decoded(envelopes.decode_cancel, "cancel", msg)
        if cancel is None:
            return
        key = cancel.uid
        task = self.tasks.get(key)
        if task is not None:
            # The reason travels in the CancelledError: "gateway" is recorded as failed.
            task.cancel(cancel.reason)
            return
        self._expire_cancels()
        self._cancelled[key] = self._clock() + self._cancel_memory
        self._cancelled.move_to_end(key)
        while len(self._cancelled) > REMEMBERED_CANCELS:
            self._cancelled.popitem(last=False)

    def _expire_cancels(self) -> None:
        """Forget the remembered cancels whose time is up (kept oldest first)."""
        now = self._clock()
        cancelled = self._cancelled
        while cancelled:
            key, expires = next(iter(cancelled.items()))
            if expires > now:
                break
            del cancelled[key]

    def _forget(self, key: str, task: asyncio.Task[None], reply_to: str) -> None:
        if self.tasks.get(key) is task:
            del self.tasks[key]
        if self._beats is not None:
            self._beats.close(reply_to)
