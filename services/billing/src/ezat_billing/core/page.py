"""The public usage page (``GET /api/usage``) built from stored rows; its shape is the
``UsagePage`` envelope (ezat_common.envelopes), which the edge renders as JSON as it is.

Shape: ``{"object":"list","data":[record…],"totals":{…},"by_day":[…],"has_more",
"next_cursor"}``; money as integer ``cost_micros`` plus ``cost_usd`` for people.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import Any

from ezat_common.envelopes import SERVER_TOOL_FIELDS, TOKEN_FIELDS
from ezat_common.usage_page import DayTotal, UsageItem, UsagePage, UsageTotals

from .cursor import Position, encode_cursor


def to_page(
    rows: Sequence[Mapping[str, Any]],
    limit: int,
    totals: Mapping[str, Any] | None,
    days: Sequence[Mapping[str, Any]],
) -> UsagePage:
    """The page for ``rows`` (fetched with ``limit + 1`` to learn whether more follow)."""
    shown = rows[:limit]
    has_more = len(rows) > limit
    next_cursor = None
    if has_more and shown:
        last = shown[-1]
        next_cursor = encode_cursor(Position(last["received_at"], last["uid"]))
    return UsagePage(
        data=[to_item(r) for r in shown],
        totals=to_totals(totals),
        by_day=[to_day(d) for d in days],
        has_more=has_more,
        next_cursor=next_cursor,
    )


def to_item(row: Mapping[str, Any]) -> UsageItem:
    cost = int(row["cost_micros"])
    return UsageItem(
        request_id=row["request_id"],
        model=row["model"],
        api=row["api"],
        stream=row["stream"],
        status=status(row),
        deployment=row["deployment"],
        region=row["region"],
        **{c: int(row[c]) for c in TOKEN_FIELDS},
        estimated=row["estimated"],
        cost_micros=cost,
        cost_usd=usd(cost),
        received_at=rfc3339(row["received_at"]),
        ttft_ms=row["ttft_ms"],
        total_ms=row["total_ms"],
        deployment_kind=row["deployment_kind"],
        **{c: int(row[c]) for c in SERVER_TOOL_FIELDS},
        team_id=row.get("team_id"),
        user=row.get("user_name"),
        tags=list(row.get("tags") or ()),
        session=row.get("session"),
        client=row.get("client") or "",
    )


def status(row: Mapping[str, Any]) -> str:
    """``pending`` while a complete row awaits its delivery confirmation: not a charge yet."""
    if row.get("awaiting_delivery") and row["status"] == "complete":
        return "pending"
    return str(row["status"])


def to_totals(row: Mapping[str, Any] | None) -> UsageTotals:
    if row is None:
        return UsageTotals()
    # SUM over no rows is NULL in SQL; an empty filter has zero totals.
    cost = int(row["cost_micros"] or 0)
    return UsageTotals(
        requests=int(row["requests"] or 0),
        **{c: int(row[c] or 0) for c in TOKEN_FIELDS},
        cost_micros=cost,
        cost_usd=usd(cost),
        **{c: int(row[c] or 0) for c in SERVER_TOOL_FIELDS},
        pending_requests=int(row.get("pending_requests") or 0),
        pending_cost_micros=int(row.get("pending_cost_micros") or 0),
    )


def to_day(row: Mapping[str, Any]) -> DayTotal:
    return DayTotal(
        day=row["day"].isoformat(),
        model=row["model"],
        requests=int(row["requests"] or 0),
        input_tokens=int(row["input_tokens"] or 0),
        output_tokens=int(row["output_tokens"] or 0),
        cost_micros=int(row["cost_micros"] or 0),
    )


def usd(micros: int) -> float:
    return micros / 1_000_000


def rfc3339(at: datetime.datetime) -> str:
    """``2025-01-31T12:00:00.123Z``: UTC, millisecond precision."""
    utc = at.astimezone(datetime.UTC)
    return utc.isoformat(timespec="milliseconds").replace("+00:00", "Z")
