"""Final replies held until their usage record is durable (SPEC §6, docs/billing.md).

The router sends a request's final reply (``ReplyEnd`` / ``ReplyBody``) at once, carrying the
encoded usage record in ``usage``, and has JetStream acknowledge the record to this request's
acknowledgement subject (``Inbox.ack_subject``), whose messages arrive in the request's reply
queue. ``Holder.durable`` says whether the record is durable: the outbox's PubAck (before or after
the final reply, within ``ACK_TIMEOUT``), else billing's own commit of ``usage``, all within
``DURABLE_DEADLINE`` of the start; the caller releases the final event only then.

A record must be stored whether or not anyone reads the answer: when the client leaves while a
confirmation waits, or before a held final reply was even taken off the queue (``rescue``), the
confirmation goes on in the background, and the request's inbox token stays open until it ends
(a late PubAck still counts). ``settle`` waits for those at shutdown.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

import msgspec
from ezat_common import bus, envelopes, outbox
from ezat_common.envelopes import ReplyBody, ReplyEnd
from ezat_common.subjects import Subjects
from nats.aio.msg import Msg

from . import metrics as m

log = logging.getLogger("ezat.edge.held")


@dataclass(slots=True)
class Held:
    """One request's state of holding: its inbox token, the PubAck once it came, the record."""

    token: str
    ack: Msg | None = None
    usage: bytes = b""  # the record of a held final reply
    started: float | None = None  # when its confirmation began (the deadline counts from here)
    settled: bool = False  # confirmed, or handed to the background
    handed_off: bool = False  # a background confirmation owns the token now


class Holder:
    def __init__(self, nc: bus.Client, subjects: Subjects, inbox: bus.Inbox) -> None:
        self.nc = nc
        self.subjects = subjects
        self.inbox = inbox
        # Confirmations whose request has gone (kept until they finish).
        self.confirming: set[asyncio.Future[bool]] = set()

    def keep_ack(self, msg: object, held: Held) -> None:
        """Note ``msg`` if it is the request's PubAck (other queue items are ignored here)."""
        if isinstance(msg, Msg) and self.inbox.is_ack(msg):
            held.ack = msg

    async def durable(self, queue: asyncio.Queue[Msg], held: Held, usage: bytes) -> bool:
        held.usage = usage
        while held.ack is None and not queue.empty():
            self.keep_ack(queue.get_nowait(), held)  # usually here already: no waiting at all
        if self._acknowledged(held):
            held.settled = True
            return True
        try:
            durable = await self._confirm(queue, held)
        except asyncio.CancelledError:
            self.hand_off(queue, held)
            raise
        held.settled = True
        return durable

    def close(self, queue: asyncio.Queue[Msg], held: Held) -> None:
        """At the end of a request: rescue a held final reply nobody took off the queue (the
        client left first), then close the inbox token unless a confirmation still needs it."""
        if not held.settled:
            self._rescue(queue, held)
        if not held.handed_off:
            self.inbox.close(held.token)

    def hand_off(self, queue: asyncio.Queue[Msg], held: Held) -> None:
        if held.settled:
            return
        held.settled = held.handed_off = True
        task = asyncio.ensure_future(self._confirm(queue, held))
        self.confirming.add(task)

        def done(t: asyncio.Future[bool]) -> None:
            self.confirming.discard(t)
            self.inbox.close(held.token)

        task.add_done_callback(done)

    async def settle(self, timeout: float = outbox.DURABLE_DEADLINE) -> None:
        """At shutdown, before NATS goes: let the background confirmations finish."""
        if self.confirming:
            await asyncio.wait(set(self.confirming), timeout=timeout)

    def _rescue(self, queue: asyncio.Queue[Msg], held: Held) -> None:
        while not queue.empty():
            msg = queue.get_nowait()
            if not isinstance(msg, Msg):
                continue  # the stream watchdog's markers
            if self.inbox.is_ack(msg):
                held.ack = msg
                continue
            try:
                reply = envelopes.decode_reply(msg.data)
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue
            if isinstance(reply, ReplyEnd | ReplyBody) and reply.usage:
                held.usage = reply.usage
        if held.usage:
            log.info("client gone before its final event; its usage is confirmed anyway")
            self.hand_off(queue, held)

    def _acknowledged(self, held: Held) -> bool:
        return held.ack is not None and outbox.acknowledged(held.ack, self.subjects.outbox_stream)

    async def _confirm(self, queue: asyncio.Queue[Msg], held: Held) -> bool:
        loop = asyncio.get_running_loop()
        if held.started is None:
            held.started = loop.time()
        start = held.started
        try:
            async with asyncio.timeout_at(start + outbox.ACK_TIMEOUT):
                while held.ack is None:
                    self.keep_ack(await queue.get(), held)
        except TimeoutError:
            pass
        if self._acknowledged(held):
            return True
        m.USAGE_FALLBACKS.inc()
        left = start + outbox.DURABLE_DEADLINE - loop.time()
        problem = await outbox.store_directly(self.nc, self.subjects.usage_record, held.usage, left)
        if problem is None:
            log.info("usage stored by billing directly (the outbox did not acknowledge it)")
            return True
        log.warning("usage not made durable, final reply withheld: %s", problem)
        return False
