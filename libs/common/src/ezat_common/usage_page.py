"""The usage query's reply (billing -> edge; docs/billing.md, "Queries"): a page or an error;
and the query's own rules that more than one member reads: the page size range (the edge
refuses outside it, billing clamps to it) and how a time is read (``parse_time``: the edge's
``from``/``to``, the CLI's ``--since``).

Tagged by ``object`` rather than ``t`` as the other envelopes are: a page's tag is its public
``"object": "list"``, so the page encoded as JSON is the ``GET /api/usage`` body as it is
(``usage_page_json``). The query itself is ``envelopes.UsageQuery``.
"""

from __future__ import annotations

import datetime

import msgspec
from msgspec import Struct

# Records per page (``UsageQuery.limit``; docs/api.md, ``GET /api/usage``).
MIN_LIMIT = 1
MAX_LIMIT = 1000


def parse_time(text: str) -> datetime.datetime:
    """The RFC 3339 time ``text`` (``Z`` or an offset; none means UTC); ValueError when it is
    not one."""
    parsed = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.UTC)


class UsageItem(Struct, kw_only=True):
    """One record of the ``GET /api/usage`` page (billing builds it; the edge also renders it
    as CSV, in this field order)."""

    request_id: str
    model: str
    api: str
    stream: bool
    status: str
    deployment: str
    region: str
    input_tokens: int
    cache_read_tokens: int
    cache_write_5m_tokens: int
    cache_write_1h_tokens: int
    output_tokens: int
    reasoning_tokens: int
    estimated: bool
    cost_micros: int
    cost_usd: float
    received_at: str
    ttft_ms: float | None
    total_ms: float | None
    # Added by issue 16, last so that CSV columns are only appended; defaults so that a page
    # from an older billing still decodes (docs/billing.md, "Server tools").
    deployment_kind: str = ""
    web_search_requests: int = 0
    web_fetch_requests: int = 0
    # Added by issue 28 (docs/billing.md, "Attribution"), appended likewise.
    team_id: str | None = None
    user: str | None = None
    tags: list[str] = []
    session: str | None = None
    client: str = ""


class UsageTotals(Struct, kw_only=True):
    requests: int = 0
    input_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_5m_tokens: int = 0
    cache_write_1h_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cost_micros: int = 0
    cost_usd: float = 0.0
    web_search_requests: int = 0
    web_fetch_requests: int = 0
    # Rows still awaiting their delivery confirmation: not in the sums above (not a charge yet;
    # docs/billing.md, "Pending rows").
    pending_requests: int = 0
    pending_cost_micros: int = 0


class DayTotal(Struct, kw_only=True):
    day: str
    model: str
    requests: int
    input_tokens: int
    output_tokens: int
    cost_micros: int


class UsagePage(Struct, kw_only=True, tag_field="object", tag="list"):
    """One page of a key's usage: the records, the totals of the whole filter, totals by day
    and model, and the cursor of the next page."""

    data: list[UsageItem]
    totals: UsageTotals
    by_day: list[DayTotal]
    has_more: bool
    next_cursor: str | None


class UsageError(Struct, kw_only=True, tag_field="object", tag="error"):
    """What a usage query answers instead of a page; ``cursor: …`` errors are the client's
    (their text starts with the parameter's name), the others billing's."""

    error: str


UsageReply = UsagePage | UsageError

decode_usage_reply = msgspec.msgpack.Decoder(UsageReply).decode
_json = msgspec.json.Encoder()


def usage_page_json(page: UsagePage) -> bytes:
    """The public ``GET /api/usage`` body (docs/openapi.yaml ``UsagePage``)."""
    return _json.encode(page)
