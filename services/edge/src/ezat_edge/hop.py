"""What the edge's relay of a request (relay.py) and of its stream (stream_relay.py) share: the
bus and its inbox, the settlement of held final replies, delivery confirmations, cancels, and
the request's error answers."""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from typing import Literal, TypeVar

from aiohttp import web
from ezat_common import bus, envelopes
from ezat_common.config import DEFAULT_STREAM_BUFFER
from ezat_common.envelopes import ReplyError
from ezat_common.errors import GatewayError
from ezat_common.liveness import OWNER_TIMEOUT
from ezat_common.settling import Holder
from ezat_common.subjects import Subjects

from . import metrics as m
from .call import Call
from .deliveries import Deliveries
from .responses import reply_response
from .streams import Outlets

log = logging.getLogger("ezat.edge.relay")
_T = TypeVar("_T")


class Hop:
    def __init__(
        self,
        nc: bus.Client,
        subjects: Subjects,
        inbox: bus.Inbox,
        claims: bus.Claims,
        first_reply_timeout: float,
        ping_interval: float,
        owner_timeout: float = OWNER_TIMEOUT,
        deliveries: Deliveries | None = None,
        stream_buffer_bytes: int = DEFAULT_STREAM_BUFFER,
    ) -> None:
        self.nc = nc
        self.subjects = subjects
        self.inbox = inbox
        self.claims = claims
        self.first_reply_timeout = first_reply_timeout
        self.ping_interval = ping_interval
        self.owner_timeout = owner_timeout
        self.holder = Holder(nc, subjects, inbox, m.USAGE_FALLBACKS.inc)
        self.deliveries = deliveries
        self.stream_buffer_bytes = stream_buffer_bytes
        self.outlets = Outlets()

    @staticmethod
    async def claim(op: Awaitable[_T]) -> _T:
        """An object-store operation (claim check); its failure is a 503 the client may retry."""
        try:
            return await op
        except Exception as exc:
            log.warning("object store unavailable: %s", type(exc).__name__)
            raise GatewayError(503, bus.CLAIM_UNAVAILABLE, retry_after=2) from None

    def delivered(self, call: Call) -> None:
        if self.deliveries is not None and call.envelope.api != "count_tokens":
            self.deliveries.add(call.envelope.uid)

    async def cancel(self, call: Call, reason: Literal["client", "gateway"] = "client") -> None:
        try:
            env = call.envelope
            cancel = envelopes.encode(
                envelopes.CancelRequest(request_id=call.rid, uid=env.uid, reason=reason)
            )
            await self.nc.publish(self.subjects.cancel, cancel)
        except Exception:
            log.warning("could not broadcast the cancellation")

    def reply_error(self, call: Call, err: ReplyError) -> web.Response:
        if call.entry is not None:
            call.entry.failed(err)
        return reply_response(call.fmt, call.rid, err, call.extra_headers)

    def error(self, call: Call, status: int, type: str, message: str) -> web.Response:
        return self.reply_error(call, ReplyError(status=status, type=type, message=message))
