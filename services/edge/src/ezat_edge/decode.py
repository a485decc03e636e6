"""A reply as the edge reads it from the request's inbox queue: NATS's no-responders is
``NO_TRANSLATOR``, a reply it cannot decode ``UNREADABLE_REPLY``; and whether publishing the
request again is safe when nobody took it (docs/reliability.md, "No translator or router for a
moment")."""

from __future__ import annotations

import msgspec
from ezat_common import bus, envelopes
from ezat_common.envelopes import NO_ROUTER, ReplyError
from ezat_common.undecodable import undecodable
from nats.aio.msg import Msg

NO_TRANSLATOR = ReplyError(
    status=529,
    type="overloaded_error",
    message="the gateway has no translator available; retry shortly",
    retry_after=2,
)
# A reply the edge cannot read ends the request as a gateway fault: the client retries, and a
# final reply that was not read is never confirmed delivered, so it is not charged.
UNREADABLE_REPLY = ReplyError(status=500, type="api_error", message="internal error; retry")


def nobody_took(reply: object, env: envelopes.ClientRequest) -> bool:
    """No translator (NATS's no-responders) or no router (the translator's ``NO_ROUTER``) took
    the request, and publishing it again is safe: its body is inline (a claim is read once)."""
    return reply is NO_TRANSLATOR or (reply == NO_ROUTER and env.body_ref is None)


def decode(msg: Msg) -> envelopes.Reply:
    if bus.is_no_responders(msg):
        return NO_TRANSLATOR
    try:
        return envelopes.decode_reply(msg.data)
    except msgspec.DecodeError as exc:
        undecodable("reply", msg.subject, exc)
        return UNREADABLE_REPLY
