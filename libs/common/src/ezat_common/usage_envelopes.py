"""The usage messages that cross NATS (msgpack, as envelopes.py): the router's ``UsageRecord``
to billing and its ``UsageAck``, the edge's ``Delivered`` (both through the usage outbox), and
``UsageQuery``. envelopes.py re-exports every name, the path callers use.
"""

from __future__ import annotations

from typing import Literal

import msgspec
from msgspec import Struct

from .envelope_parts import Api, Attribution, Identified
from .prices import Prices

UsageStatus = Literal["complete", "client_closed", "failed"]
# The token counts a usage record carries, in the order of its fields and of billing's columns
# (the usage page and its totals carry the same names).
TOKEN_FIELDS = (
    "input_tokens",
    "cache_read_tokens",
    "cache_write_5m_tokens",
    "cache_write_1h_tokens",
    "output_tokens",
    "reasoning_tokens",
)


class UsageRecord(Struct, Identified, kw_only=True, tag_field="t", tag="usage"):
    """router -> billing: what one request consumed. Billing prices it and stores it once."""

    request_id: str
    key_id: str
    model: str
    api: Api
    stream: bool
    status: UsageStatus
    uid: str = ""
    deployment: str = ""
    region: str = ""
    input_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_5m_tokens: int = 0
    cache_write_1h_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    estimated: bool = False
    received_at: float = 0.0
    upstream_started_at: float = 0.0
    first_token_at: float = 0.0
    finished_at: float = 0.0
    error_type: str | None = None
    # The deployment's kind (anthropic, bedrock, vertex: docs/routing.md, "Deployment kinds").
    deployment_kind: str = ""
    # Server-tool requests the upstream reported in ``usage.server_tool_use``, priced per
    # request (docs/billing.md, "Server tools"). Defaults: records of older routers decode.
    web_search_requests: int = 0
    web_fetch_requests: int = 0
    # The prices the router priced the answer at (its ``cost_usd``): billing stores the row at
    # these, so the row's cost equals the answer's (docs/billing.md, "Cost in the answer").
    # None (older routers, records nobody answered with a cost): billing's own config prices it.
    prices: Prices | None = None
    # Team, user, tags, session and client family of the request (migration 0008).
    attribution: Attribution | None = None

    def __post_init__(self) -> None:
        Identified.__post_init__(self)
        # Routers older than deployment kinds sent none, and had only Anthropic deployments.
        if not self.deployment_kind and self.deployment:
            self.deployment_kind = "anthropic"


# The per-request counts of a record (server tools), beside its TOKEN_FIELDS.
SERVER_TOOL_FIELDS = ("web_search_requests", "web_fetch_requests")


class Delivered(Struct, kw_only=True, tag_field="t", tag="delivered"):
    """edge -> billing, through the usage outbox: the requests (uids) whose final event this edge
    wrote to its client, or whose client left first (docs/billing.md, "Billed only when
    delivered"). Batched: one message per ``Deliveries`` flush."""

    uids: list[str]


# What the usage outbox stream carries.
OutboxMessage = UsageRecord | Delivered


class UsageAck(Struct, kw_only=True, tag_field="t", tag="usage_ack"):
    request_id: str
    ok: bool
    cost_micros: int = 0
    error: str | None = None


class UsageQuery(Struct, kw_only=True, tag_field="t", tag="usage_query"):
    key_id: str | None = None
    # The usage of every key that belongs to this team now (the edge's team budget).
    team_id: str | None = None
    since: float | None = None
    until: float | None = None
    model: str | None = None
    limit: int = 100
    cursor: str | None = None
    # Read your own usage: first wait (up to a second) until what the usage outbox holds now is
    # stored, so a row shows as soon as its final event was sent (docs/billing.md).
    fresh: bool = False


decode_usage_record = msgspec.msgpack.Decoder(UsageRecord).decode
decode_outbox = msgspec.msgpack.Decoder(OutboxMessage).decode
decode_usage_ack = msgspec.msgpack.Decoder(UsageAck).decode
decode_usage_query = msgspec.msgpack.Decoder(UsageQuery).decode
