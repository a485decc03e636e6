"""Internal messages that cross NATS, encoded with msgpack (bytes travel without base64).

One request's path (see docs/architecture.md):

    edge --ClientRequest--> translator --RouteRequest--> router --HTTP--> deployment
    router --Reply*--> edge                      (Anthropic API: the format does not change)
    router --Reply*--> translator --Reply*--> edge  (OpenAI API: the translator converts events)
    router --UsageRecord--> billing --UsageAck--> router   (before the final Reply is released)

Every message carries the request id. Replies are a tagged union; a reply stream is
``ReplyHead`` (stream only), ``ReplyChunk``*, then exactly one final ``ReplyEnd``, ``ReplyBody``
or ``ReplyError``.

This module holds the request path's messages; the usage messages are in usage_envelopes.py,
the fetcher's in fetch_envelopes.py, what they share in envelope_parts.py. Every name is
re-exported here: callers write ``envelopes.UsageRecord`` whichever module defines it.
"""

from __future__ import annotations

from typing import Literal

import msgspec
from msgspec import Struct

from .envelope_parts import Api as Api
from .envelope_parts import Attribution as Attribution
from .envelope_parts import Identified
from .fetch_envelopes import FetchRequest as FetchRequest
from .fetch_envelopes import FetchResult as FetchResult
from .fetch_envelopes import decode_fetch_request as decode_fetch_request
from .fetch_envelopes import decode_fetch_result as decode_fetch_result
from .usage_envelopes import SERVER_TOOL_FIELDS as SERVER_TOOL_FIELDS
from .usage_envelopes import TOKEN_FIELDS as TOKEN_FIELDS
from .usage_envelopes import Delivered as Delivered
from .usage_envelopes import OutboxMessage as OutboxMessage
from .usage_envelopes import UsageAck as UsageAck
from .usage_envelopes import UsageQuery as UsageQuery
from .usage_envelopes import UsageRecord as UsageRecord
from .usage_envelopes import UsageStatus as UsageStatus
from .usage_envelopes import decode_outbox as decode_outbox
from .usage_envelopes import decode_usage_ack as decode_usage_ack
from .usage_envelopes import decode_usage_query as decode_usage_query
from .usage_envelopes import decode_usage_record as decode_usage_record

# The APIs whose answers the translator converts from Messages (the router relays the
# deployment's bytes to it unchanged); the others reach the edge as the router sends them.
CONVERTED: frozenset[str] = frozenset({"chat", "responses"})


class ClientRequest(Struct, Identified, kw_only=True, tag_field="t", tag="client_request"):
    """edge -> translator: an authenticated client request, body untouched."""

    request_id: str
    api: Api
    key_id: str
    reply_to: str
    received_at: float
    # Unique per request, made by the edge: the identity of the request inside the gateway
    # (usage primary key, cancellation, per-request state). ``request_id`` is the client-visible
    # id, which a client may choose and reuse, so it never identifies a request on its own.
    uid: str = ""
    body: bytes = b""
    # Claim check: the body lives in the JetStream object store under this name (> max_payload).
    body_ref: str | None = None
    session: str | None = None
    cache: str | None = None
    beta: str | None = None
    # The key's input tokens per minute (None: no limit): the translator counts what it adds
    # to the body (a stored conversation, previous_response_id) in the same window.
    tpm: int | None = None
    # The key's team and its input tokens per minute (None: no team, or no team limit): the
    # stored conversation counts in the team's window too (docs/tenancy.md).
    team_id: str | None = None
    team_tpm: int | None = None
    # The canonical ids of the models the key may use (its list intersected with its team's,
    # resolved by the edge's catalogue; docs/tenancy.md). None: every model. Any other model
    # is the unknown model's 404, decided where the translator resolves the name.
    models: list[str] | None = None
    # Spend attribution, for the usage record (None: an older edge).
    attribution: Attribution | None = None


class RouteRequest(Struct, Identified, kw_only=True, tag_field="t", tag="route_request"):
    """translator -> router: an Anthropic Messages body to run on one deployment of ``model``.

    ``body`` is the request JSON *without* its ``model`` and ``stream`` fields (``stream`` is
    this message's): the router writes both where the deployment's kind wants them, without
    parsing the body again (docs/routing.md, "Deployment kinds").
    """

    request_id: str
    api: Api
    key_id: str
    model: str
    response_model: str
    uid: str = ""
    stream: bool
    reply_to: str
    received_at: float
    body: bytes = b""
    body_ref: str | None = None
    session_key: str | None = None
    # Hash of the stable prefix (model, system, tools): affinity for requests without a session.
    prefix_hash: str | None = None
    # The largest cache_control TTL the request uses ("5m" or "1h"), for the affinity binding.
    cache_ttl: str | None = None
    beta: str | None = None
    # The edge's reply subject of this request: where cancellation of the client is heard, and
    # (``bus.ack_subject_of`` it) where the outbox acknowledges the usage record to the edge,
    # which holds the final event (docs/billing.md). Empty: the router holds it.
    client_reply_to: str = ""
    # count_tokens only: the translator's local estimate of the input tokens, what the router
    # answers when no deployment of the model can count (docs/api.md, "count_tokens"). None:
    # another api, or an older translator (the router then asks the deployments as before).
    input_estimate: int | None = None
    # The client request's attribution, ``user`` from ``metadata.user_id`` when it has one.
    attribution: Attribution | None = None


class ReplyHead(Struct, kw_only=True, tag_field="t", tag="head"):
    """The response has started streaming: its headers and its first SSE bytes, in one message
    (one publish fewer on the way to the first token)."""

    headers: dict[str, str] = {}
    data: bytes = b""


class ReplyChunk(Struct, kw_only=True, tag_field="t", tag="chunk"):
    """Ready-to-write SSE bytes (one or more whole events)."""

    data: bytes
    # Position in its stream: 1 for the first chunk after the ReplyHead, then one more each
    # (the ReplyEnd follows the last). A receiver that sees a number skipped lost a message on
    # the way (a NATS server died between sender and receiver) and ends the stream with
    # ``PART_LOST`` instead of a complete answer missing a piece. 0: not numbered (an older
    # sender), not checked.
    seq: int = 0


class _Final(Struct, kw_only=True):
    """A final reply that completes a request, released only once its usage is durable
    (``ezat_common.settlement``)."""

    # The one field of the final-event rule: the encoded UsageRecord the receiver holds this
    # reply for until the outbox (or billing) confirms it; empty: the sender made it durable.
    usage: bytes = b""
    seq: int = 0  # as ReplyChunk.seq: one after the last chunk


class ReplyEnd(_Final, kw_only=True, tag_field="t", tag="end"):
    """Final SSE bytes of a stream."""

    data: bytes = b""


class ReplyBody(_Final, kw_only=True, tag_field="t", tag="body"):
    """A complete JSON response (non-streaming); final."""

    status: int = 200
    headers: dict[str, str] = {}
    data: bytes = b""
    data_ref: str | None = None


class ReplyError(Struct, kw_only=True, tag_field="t", tag="error"):
    """The request failed; final. Before a ReplyHead it becomes an HTTP error response,
    after one an in-stream error event (errors.py: the ``GatewayError`` that carries it, and the
    renderer of each API)."""

    status: int
    type: str
    message: str
    param: str | None = None
    code: str | None = None
    retry_after: float | None = None
    headers: dict[str, str] = {}
    # The deployment's HTTP status behind this error (the router's upstream answer of the last
    # attempt), for the request log (docs/observability.md); None: no upstream answered (the
    # gateway's own refusal, unreachable, timed out), or an older router.
    upstream_status: int | None = None
    # The message is the deployment's own (a relayed 4xx, or its stream's error event): the
    # client is given it, the request log never (it may quote the prompt; the log stores
    # ``request_log.relayed_reason`` instead). False from an older router.
    relayed: bool = False

    def with_headers(self, headers: dict[str, str]) -> ReplyError:
        """This error with ``headers`` added over its own; itself when there are none (the
        shared constants, ``UNRECORDED`` and the like, are never changed)."""
        if not headers:
            return self
        return msgspec.structs.replace(self, headers={**self.headers, **headers})


# A completed request whose usage could not be made durable (docs/billing.md): it is not
# completed and not charged. Sent by the router, or written by a receiver that held the final
# reply itself.
UNRECORDED = ReplyError(
    status=500,
    type="api_error",
    message=(
        "the request's usage could not be recorded, so it was not completed and you were not "
        "charged; retry"
    ),
)


class Heartbeat(Struct, kw_only=True, tag_field="t", tag="alive"):
    """The process holding a request is alive (liveness.py): sent to a request's reply subject
    while the holder has sent nothing else for ``liveness.HEARTBEAT_INTERVAL``. Never final.

    ``stream`` says the request is a stream, so a receiver that has waited ``ping_interval`` for
    the first byte may commit the SSE response and keep the client's connection alive with pings.
    """

    stream: bool = False


# The process serving a request fell silent (died, or lost NATS) before the request finished
# (liveness.py); sent by a hop that noticed, or written by the edge itself. Nothing was recorded
# for it by the one that noticed: the dead holder's record, if any, stands on its own.
def skipped(expected: int, seq: int) -> bool:
    """True when a numbered stream message (``ReplyChunk.seq``) is not the one expected: one
    before it was lost. Unnumbered (0) messages are never a gap."""
    return seq != 0 and seq != expected


# A stream reply that came with a number skipped (docs/reliability.md, "A 3-node NATS cluster").
PART_LOST = ReplyError(
    status=529,
    type="overloaded_error",
    message="part of this answer was lost inside the gateway (a NATS server went away); retry",
    retry_after=1.0,
)


OWNER_LOST = ReplyError(
    status=529,
    type="overloaded_error",
    message="the gateway process serving this request stopped before it finished; retry",
    retry_after=1.0,
)


# No router subscribed when the translator published the route (none runs, or a rolling restart's
# gap of milliseconds): the edge publishes the request again for a while before showing it.
NO_ROUTER = ReplyError(
    status=529,
    type="overloaded_error",
    message="no router is available to run the request; retry shortly",
    retry_after=2,
)


Reply = ReplyHead | ReplyChunk | ReplyEnd | ReplyBody | ReplyError | Heartbeat


class CancelRequest(Struct, Identified, kw_only=True, tag_field="t", tag="cancel"):
    """edge -> routers and translators: stop this request.

    ``reason`` "client": the client disconnected (what was consumed is billed, estimated);
    "gateway": the gateway failed it after its stream started (a holder died), so it is recorded
    as failed and not charged (docs/billing.md).
    """

    request_id: str
    uid: str = ""
    reason: Literal["client", "gateway"] = "client"


class HealthReply(Struct, kw_only=True, tag_field="t", tag="health"):
    """One replica's answer to its service's health probe (every replica answers)."""

    service: str
    ok: bool
    detail: str = ""
    # What the replica sees beyond itself, for the edge's /api/status: the router's deployments
    # and their availability ("up", "cooling", "open", "half_open").
    states: dict[str, str] = msgspec.field(default_factory=dict)


_encoder = msgspec.msgpack.Encoder()
encode = _encoder.encode

decode_reply = msgspec.msgpack.Decoder(Reply).decode
decode_client_request = msgspec.msgpack.Decoder(ClientRequest).decode
decode_route_request = msgspec.msgpack.Decoder(RouteRequest).decode
decode_cancel = msgspec.msgpack.Decoder(CancelRequest).decode
decode_health = msgspec.msgpack.Decoder(HealthReply).decode
