"""NATS callbacks: decode, hand the request to the router in its own task, track it for cancel.

A subscription's callback runs messages one at a time, so ``on_route`` only decodes and spawns.
Tasks are kept by request id so a ``CancelRequest`` (broadcast to every replica) can cancel the
one this replica runs. A cancel can overtake its request on the way (the client left while the
translator was still working); recently cancelled ids are remembered so that request is dropped.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict

import msgspec
from ezat_common import envelopes
from nats.aio.msg import Msg

from .routing import Router

log = logging.getLogger("ezat.router")

_BAD_MESSAGE = (msgspec.DecodeError, msgspec.ValidationError)
# Cancels for requests this replica does not (yet) run; bounded, oldest forgotten first.
REMEMBERED_CANCELS = 4096


class Handlers:
    def __init__(self, router: Router) -> None:
        self._router = router
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self._cancelled: OrderedDict[str, None] = OrderedDict()

    async def on_route(self, msg: Msg) -> None:
        try:
            req = envelopes.decode_route_request(msg.data)
        except _BAD_MESSAGE as exc:
            log.warning("undecodable route request dropped", extra={"fields": {"err": str(exc)}})
            return
        if req.request_id in self._cancelled:
            del self._cancelled[req.request_id]
            return  # the client is already gone
        task = asyncio.get_running_loop().create_task(self._router.run(req))
        self.tasks[req.request_id] = task
        task.add_done_callback(lambda done: self._forget(req.request_id, done))

    async def on_cancel(self, msg: Msg) -> None:
        try:
            cancel = envelopes.decode_cancel(msg.data)
        except _BAD_MESSAGE:
            return
        task = self.tasks.get(cancel.request_id)
        if task is not None:
            task.cancel()
            return
        self._cancelled[cancel.request_id] = None
        if len(self._cancelled) > REMEMBERED_CANCELS:
            self._cancelled.popitem(last=False)

    def _forget(self, request_id: str, task: asyncio.Task[None]) -> None:
        if self.tasks.get(request_id) is task:
            del self.tasks[request_id]
