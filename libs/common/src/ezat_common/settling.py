"""Carrying out the final-event rule (``settlement.py``) over NATS, for whoever holds a final
reply: the edge (``Holder``, its acknowledgements in the request's inbox queue) and the router
when no edge holds it (``Billing.record``, the acknowledgement of its own ``Outbox.put``).
docs/billing.md, "Durable before the final event", has the rule and its bounds.

The router publishes a request's usage record to the outbox with the PubAck addressed to the
edge's acknowledgement subject (``bus.ack_subject_of`` the edge's reply subject), and sends the
final reply at once carrying the record in ``usage``. The edge feeds what arrives to the
request's ``Settlement`` and releases the final event on ``Release``. A record must be stored
whether or not anyone reads the answer: when the client leaves while a settlement waits, or
before a held final reply was even taken off the queue (``Holder.close``), it goes on in the
background and the request's inbox token stays open until it ends (a late PubAck still counts).
``Holder.settle`` waits for those at shutdown.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import msgspec
from nats.aio.client import Client
from nats.aio.msg import Msg

from . import bus, envelopes, outbox
from .envelopes import ReplyBody, ReplyEnd
from .settlement import (
    DURABLE_DEADLINE,
    AskBilling,
    AwaitAck,
    Decision,
    HandOff,
    Release,
    Settlement,
    Withhold,
)
from .subjects import Subjects
from .tasks import TaskSet
from .undecodable import undecodable

log = logging.getLogger("ezat.settling")


class Queued(Protocol):
    """A request's inbox queue: its replies and acknowledgements (``Msg``), and whatever else
    its driver queues beside them (not this module's: skipped)."""

    def empty(self) -> bool: ...

    def get_nowait(self) -> object: ...

    async def get(self) -> object: ...


class Acks(Protocol):
    async def next(self, until: float) -> bool | None:
        """The outbox's verdict on the record by ``until`` (event-loop time): True stored, False
        refused, None nothing yet."""
        ...


class Settler:
    """Runs a settlement's decisions until it is released or withheld."""

    def __init__(
        self, nc: Client, subjects: Subjects, on_ask: Callable[[], None] | None = None
    ) -> None:
        self._nc = nc
        self._subject = subjects.usage_record
        self._on_ask = on_ask  # counts fallbacks to billing (the caller's metric)

    async def run(
        self,
        s: Settlement,
        decision: Decision,
        usage: bytes,
        acks: Acks,
        fields: dict[str, object] | None = None,
        traceparent: str | None = None,
    ) -> bool:
        """True once released; False when withheld (logged with ``fields``). ``traceparent``
        rides on the request to billing, for its span."""
        loop = asyncio.get_running_loop()
        while True:
            match decision:
                case Release():
                    return True
                case Withhold(reason=reason):
                    log.warning(
                        "usage not made durable, final reply withheld: %s",
                        reason,
                        extra={"fields": fields or {}},
                    )
                    return False
                case AwaitAck(until=until):
                    ok = await acks.next(until)
                    now = loop.time()
                    decision = s.timer(now) if ok is None else s.ack(ok, now)
                case AskBilling(timeout=timeout):
                    if self._on_ask is not None:
                        self._on_ask()
                    problem = await outbox.store_directly(
                        self._nc, self._subject, usage, timeout, traceparent
                    )
                    decision = s.billing(problem, loop.time())
                    if problem is None:
                        log.info("usage stored by billing directly (the outbox did not confirm)")
                case _:  # Idle, HandOff: not produced while a settlement runs
                    return s.released


class PutAck:
    """The router's acknowledgement: its own ``Outbox.put`` of the record (one attempt), with
    ``traceparent`` (the routing span's) in its headers, for billing's span."""

    __slots__ = ("_box", "_data", "_traceparent", "_uid")

    def __init__(
        self, box: outbox.Outbox, uid: str, data: bytes, traceparent: str | None = None
    ) -> None:
        self._box = box
        self._uid = uid
        self._data = data
        self._traceparent = traceparent

    async def next(self, until: float) -> bool | None:
        timeout = until - asyncio.get_running_loop().time()
        return await self._box.put(self._uid, self._data, max(timeout, 0.01), self._traceparent)


@dataclass(slots=True)
class Held:
    """One request's holding: its inbox token, its settlement and the record it settles."""

    token: str
    settlement: Settlement = field(default_factory=Settlement)
    usage: bytes = b""


class _QueueAcks:
    """Acknowledgements from the request's inbox queue (replies there are ignored: after the
    final reply nothing else belongs to the answer)."""

    __slots__ = ("_holder", "_queue")

    def __init__(self, holder: Holder, queue: Queued) -> None:
        self._holder = holder
        self._queue = queue

    async def next(self, until: float) -> bool | None:
        try:
            async with asyncio.timeout_at(until):
                while True:
                    msg = await self._queue.get()
                    if isinstance(msg, Msg) and self._holder.inbox.is_ack(msg):
                        return self._holder.verdict(msg)
        except TimeoutError:
            return None


class Holder:
    """The edge's side: settlements of the final replies it holds, fed from the inbox."""

    def __init__(
        self,
        nc: Client,
        subjects: Subjects,
        inbox: bus.Inbox,
        on_ask: Callable[[], None] | None = None,
    ) -> None:
        self.inbox = inbox
        self._stream = subjects.outbox_stream
        self._settler = Settler(nc, subjects, on_ask)
        # Settlements whose request has gone (kept until they finish).
        self.confirming = TaskSet()

    def verdict(self, ack: Msg) -> bool:
        return outbox.acknowledged(ack, self._stream)

    def ack(self, held: Held, msg: Msg) -> None:
        """An acknowledgement that came before the final reply it acknowledges."""
        held.settlement.ack(self.verdict(msg), asyncio.get_running_loop().time())

    async def durable(self, queue: Queued, held: Held, usage: bytes) -> bool:
        """Whether the final reply carrying ``usage`` may be released."""
        held.usage = usage
        s = held.settlement
        loop = asyncio.get_running_loop()
        while not (s.ok or s.refused) and not queue.empty():
            msg = queue.get_nowait()  # usually here already: no waiting at all
            if isinstance(msg, Msg) and self.inbox.is_ack(msg):
                self.ack(held, msg)
        decision = s.final(loop.time())
        if isinstance(decision, Release):
            return True
        try:
            return await self._settler.run(s, decision, usage, _QueueAcks(self, queue))
        except asyncio.CancelledError:
            self._hand_off(queue, held)
            raise

    def close(self, queue: Queued, held: Held) -> None:
        """At the end of a request: settle a held final reply nobody took off the queue (the
        client left first), then close the inbox token unless a settlement still needs it."""
        if not held.usage:
            self._rescue(queue, held)
        if not self._hand_off(queue, held):
            self.inbox.close(held.token)

    async def settle(self, timeout: float = DURABLE_DEADLINE) -> None:
        """At shutdown, before NATS goes: let the background settlements finish."""
        await self.confirming.wait(timeout)

    def _hand_off(self, queue: Queued, held: Held) -> bool:
        s = held.settlement
        if not isinstance(s.client_gone(), HandOff):
            return s.handed_off
        loop = asyncio.get_running_loop()
        acks = _QueueAcks(self, queue)
        task = self.confirming.spawn(self._settler.run(s, s.resume(loop.time()), held.usage, acks))
        task.add_done_callback(lambda _: self.inbox.close(held.token))
        return True

    def _rescue(self, queue: Queued, held: Held) -> None:
        """A final reply still queued: its record is settled like one the client had read."""
        while not queue.empty():
            msg = queue.get_nowait()
            if not isinstance(msg, Msg):
                continue  # not a message of the bus
            if self.inbox.is_ack(msg):
                self.ack(held, msg)
                continue
            try:
                reply = envelopes.decode_reply(msg.data)
            except msgspec.DecodeError as exc:
                undecodable("reply", msg.subject, exc)
                continue
            if isinstance(reply, ReplyEnd | ReplyBody) and reply.usage:
                held.usage = reply.usage
        if held.usage:
            log.info("client gone before its final event; its usage is settled anyway")
            held.settlement.final(asyncio.get_running_loop().time())
