"""What the relay knows of one request (``Call``), of one publish of it (``Publish``), and of a
stream committed to its client before any of its answer (``Committed``): relay.py's state,
beside it so that the handler (which makes a ``Call`` and reads back its first token) and the
tests need not import the relay loop for it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from aiohttp import web
from ezat_common import envelopes
from ezat_common.exchange import Exchange, Tick
from ezat_common.settling import Held
from nats.aio.msg import Msg

from . import metrics as m
from .core.request_log import Entry
from .responses import Format
from .streams import Outlet, SseResponse


@dataclass(slots=True)
class Committed:
    """A stream whose status line and pings went out, none of its answer yet: the next publish
    of its request writes to it."""

    resp: SseResponse
    outlet: Outlet


@dataclass(slots=True)
class Call:
    """What the relay needs to know about one request."""

    request: web.Request
    rid: str
    fmt: Format
    envelope: envelopes.ClientRequest
    extra_headers: dict[str, str]
    started: float
    # What the request's NATS messages carry (docs/observability.md, "Traces"): the client's
    # traceparent as received with tracing off, the edge span's with it on; None: no header.
    traceparent: str | None = None
    # The trace this request belongs to, once tracing sets it: the exemplar of its latencies.
    trace_id: str | None = None
    # Called with the old and the new uid before the request is published again under a new uid
    # (its first holder died): its budget hold follows it (handlers.py).
    republished: Callable[[str, str], Awaitable[None]] | None = None
    # When its first content event was written (0.0: not yet; docs/observability.md, "Edge").
    first_token: float = field(default=0.0, init=False)
    # Its request-log entry (request_log.py), filled in with what the relay learns.
    entry: Entry | None = field(default=None, init=False)
    meter: m.ApiMeters = field(init=False)

    def __post_init__(self) -> None:
        self.meter = m.METERS[self.fmt]


@dataclass(slots=True)
class Publish:
    """One publish of a request: where its replies arrive, the request's exchange (the relay
    rule's state, across its publishes), and the stream it carries on, if any."""

    call: Call
    ex: Exchange
    queue: asyncio.Queue[Msg | Tick]
    held: Held  # its inbox token and the settlement of its final reply
    subject: str  # its reply subject
    committed: Committed | None = None  # a stream committed by an earlier publish
    data: bytes = b""  # the encoded envelope: sent again while nobody takes it
