"""The ``usage_records`` row built from one priced usage record (columns of the migrations).

``uid`` is the row's primary key: the request's identity inside the gateway
(the edge-made uid, or the request id from producers that send none, resolved when the record
is decoded).
``request_id`` is the client-visible id, which a client may choose and reuse: it is shown, never
used to tell requests apart.
"""

from __future__ import annotations

import datetime
import math
from typing import Any

from ezat_common.catalogue import Prices
from ezat_common.envelopes import SERVER_TOOL_FIELDS, TOKEN_FIELDS, UsageRecord
from msgspec import Struct

from .pricing import prices_json

_MAX_EPOCH = 253_402_300_799.0  # the end of year 9999, where datetimes end


class UsageRow(Struct, frozen=True, kw_only=True):
    """One row to insert; ``received_at`` is timezone-aware UTC, timings are milliseconds."""

    uid: str
    request_id: str
    key_id: str
    model: str
    api: str
    stream: bool
    deployment: str
    region: str
    status: str
    input_tokens: int
    cache_read_tokens: int
    cache_write_5m_tokens: int
    cache_write_1h_tokens: int
    output_tokens: int
    reasoning_tokens: int
    estimated: bool
    cost_micros: int
    prices: dict[str, int]
    received_at: datetime.datetime
    queued_ms: float | None
    ttft_ms: float | None
    total_ms: float | None
    error_type: str | None
    # What served it and the server tools it ran (migration 0004; docs/billing.md).
    deployment_kind: str = ""
    web_search_requests: int = 0
    web_fetch_requests: int = 0
    # A complete record is charged for good once the edge confirms its delivery (settle.py).
    awaiting_delivery: bool = False
    # Attribution (migration 0008; docs/billing.md, "Attribution").
    team_id: str | None = None
    user_name: str | None = None
    tags: list[str] = []
    session: str | None = None
    client: str = ""


def to_row(record: UsageRecord, prices: Prices, cost: int) -> UsageRow:
    """The row for ``record`` billed ``cost`` micro-dollars at ``prices``."""
    return UsageRow(
        uid=record.uid,
        request_id=record.request_id,
        key_id=record.key_id,
        model=record.model,
        api=record.api,
        stream=record.stream,
        deployment=record.deployment,
        region=record.region,
        status=record.status,
        input_tokens=record.input_tokens,
        cache_read_tokens=record.cache_read_tokens,
        cache_write_5m_tokens=record.cache_write_5m_tokens,
        cache_write_1h_tokens=record.cache_write_1h_tokens,
        output_tokens=record.output_tokens,
        reasoning_tokens=record.reasoning_tokens,
        estimated=record.estimated,
        cost_micros=cost,
        prices=prices_json(prices),
        received_at=datetime.datetime.fromtimestamp(record.received_at, datetime.UTC),
        queued_ms=_since_received(record, record.upstream_started_at),
        ttft_ms=_since_received(record, record.first_token_at),
        total_ms=_since_received(record, record.finished_at),
        error_type=record.error_type,
        deployment_kind=record.deployment_kind,
        web_search_requests=record.web_search_requests,
        web_fetch_requests=record.web_fetch_requests,
        awaiting_delivery=record.status == "complete",
        **_attribution(record),
    )


def _attribution(record: UsageRecord) -> dict[str, Any]:
    a = record.attribution
    if a is None:  # an older router's record
        return {}
    return {
        "team_id": a.team_id,
        "user_name": a.user,
        "tags": a.tags,
        "session": a.session,
        "client": a.client,
    }


def _since_received(record: UsageRecord, at: float) -> float | None:
    # 0.0 means "never happened" (no upstream call, no first token): NULL, not a negative time.
    if at <= 0 or record.received_at <= 0:
        return None
    return float(at - record.received_at) * 1000.0


# Far above any real request, far below int8 overflow of tokens x price in the SUM() of a query.
MAX_TOKENS = 10**12


def problem_of(record: UsageRecord) -> str | None:
    """What makes ``record`` unstorable, or None. A bad record must fail alone, not its batch."""
    if not record.request_id or len(record.request_id) > 256:
        return "request_id: must have 1 to 256 characters"
    if len(record.uid) > 256:
        return "uid: must have at most 256 characters"
    if not record.key_id:
        return "key_id: must not be empty"
    for name in (*TOKEN_FIELDS, *SERVER_TOOL_FIELDS):
        value = getattr(record, name)
        if not 0 <= value <= MAX_TOKENS:
            return f"{name}: must be between 0 and {MAX_TOKENS}"
    for name in ("received_at", "upstream_started_at", "first_token_at", "finished_at"):
        value = getattr(record, name)
        if not (math.isfinite(value) and 0 <= value < _MAX_EPOCH):
            return f"{name}: must be a time in seconds since the epoch"
    if record.received_at <= 0:
        return "received_at: must be set"
    if len(record.deployment_kind) > 64:
        return "deployment_kind: must have at most 64 characters"
    return _attribution_problem(record)


def _attribution_problem(record: UsageRecord) -> str | None:
    a = record.attribution
    if a is None:
        return None
    for name, value in (("team_id", a.team_id), ("user", a.user), ("session", a.session)):
        if value is not None and len(value) > 256:
            return f"attribution.{name}: must have at most 256 characters"
    if len(a.tags) > 10 or any(not 1 <= len(t) <= 64 for t in a.tags):
        return "attribution.tags: at most 10 tags of 1 to 64 characters"
    if len(a.client) > 64:
        return "attribution.client: must have at most 64 characters"
    return None
