"""Waiting for a request's first reply (docs/reliability.md, "A holder dies" and "No translator
or router for a moment"): within ``first_reply_timeout``, while its holder is heard from, and
with the request published again while nobody takes it (a rolling restart's gap).
"""

from __future__ import annotations

import asyncio

import msgspec
from ezat_common import bus, envelopes, tracing
from ezat_common.envelopes import NO_ROUTER, Heartbeat, ReplyError
from ezat_common.settling import Held, Holder
from ezat_common.subjects import Subjects
from ezat_common.undecodable import undecodable
from nats.aio.msg import Msg

from . import metrics as m

# How long a request waits for a translator or router to subscribe again (a rolling restart).
NO_RESPONDER_WAIT = 1.0
NO_TRANSLATOR = ReplyError(
    status=529,
    type="overloaded_error",
    message="the gateway has no translator available; retry shortly",
    retry_after=2,
)
# A reply the edge cannot read ends the request as a gateway fault: the client retries, and a
# final reply that was not read is never confirmed delivered, so it is not charged.
UNREADABLE_REPLY = ReplyError(status=500, type="api_error", message="internal error; retry")


def nobody_took(reply: envelopes.Reply | None, env: envelopes.ClientRequest) -> bool:
    """No translator (NATS's no-responders) or no router (the translator's ``NO_ROUTER``) took
    the request, and publishing it again is safe: its body is inline (a claim is read once)."""
    return reply is NO_TRANSLATOR or (reply == NO_ROUTER and env.body_ref is None)


class OwnerLost(Exception):
    """The request's holder fell silent for ``OWNER_TIMEOUT`` before its first reply."""


def decode(msg: Msg) -> envelopes.Reply:
    if bus.is_no_responders(msg):
        return NO_TRANSLATOR
    try:
        return envelopes.decode_reply(msg.data)
    except msgspec.DecodeError as exc:
        undecodable("reply", msg.subject, exc)
        return UNREADABLE_REPLY


class FirstReplies:
    def __init__(
        self,
        nc: bus.Client,
        subjects: Subjects,
        inbox: bus.Inbox,
        holder: Holder,
        first_reply_timeout: float,
        ping_interval: float,
        owner_timeout: float,
    ) -> None:
        self.nc = nc
        self.subjects = subjects
        self.inbox = inbox
        self.holder = holder
        self.first_reply_timeout = first_reply_timeout
        self.ping_interval = ping_interval
        self.owner_timeout = owner_timeout

    async def first(
        self, started: float, queue: asyncio.Queue[Msg], held: Held
    ) -> envelopes.Reply | None:
        """The first reply, within ``first_reply_timeout`` (TimeoutError), and while its holder
        is heard from (else ``OwnerLost``); None when a stream waited ``ping_interval`` (from
        ``started``) for it and is to be committed now. An outbox acknowledgement that overtook
        the final reply it belongs to goes to ``held``'s settlement."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.first_reply_timeout
        commit_at = started + self.ping_interval
        while True:
            silent_at = loop.time() + self.owner_timeout
            try:
                async with asyncio.timeout_at(min(deadline, silent_at)):
                    msg = await queue.get()
            except TimeoutError:
                if silent_at < deadline:
                    raise OwnerLost from None
                raise
            if self.inbox.is_ack(msg):
                self.holder.ack(held, msg)
                continue
            reply = decode(msg)
            if type(reply) is not Heartbeat:
                return reply
            if reply.stream and loop.time() >= commit_at:
                return None

    async def once_taken(
        self,
        started: float,
        queue: asyncio.Queue[Msg],
        held: Held,
        data: bytes,
        subject: str,
        env: envelopes.ClientRequest,
        traceparent: str | None = None,
    ) -> envelopes.Reply | None:
        """No translator, or no router behind it, subscribed when the request was published:
        during a rolling restart the old replica has left its queue group and the new one is
        about to join (milliseconds). Publish again (with its ``traceparent``) with backoff for
        up to ``NO_RESPONDER_WAIT`` before telling the client."""
        loop = asyncio.get_running_loop()
        give_up = loop.time() + NO_RESPONDER_WAIT
        delay = 0.02
        first: envelopes.Reply | None = None
        while loop.time() + delay < give_up:
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.25)
            headers = tracing.headers(traceparent)
            await self.nc.publish(self.subjects.translate, data, reply=subject, headers=headers)
            first = await self.first(started, queue, held)
            if not nobody_took(first, env):
                return first
        m.NO_RESPONDER.inc()
        return first
