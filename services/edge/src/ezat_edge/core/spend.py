"""``GET /admin/v1/spend`` without the socket (docs/billing.md, "Spend reports"): its parameters
and the rendering of the report as JSON or CSV. The query is ezat_common.spend_store's."""

from __future__ import annotations

import csv
import datetime
import io
from collections.abc import Mapping, Sequence
from typing import Any

from ezat_common.errors import invalid
from ezat_common.spend_store import GROUPS, SUMS
from msgspec import Struct


class SpendQuery(Struct, frozen=True, kw_only=True):
    group_by: tuple[str, ...]
    since: datetime.datetime | None
    until: datetime.datetime | None
    csv: bool


def to_query(q: Mapping[str, str]) -> SpendQuery:
    """The report a request asks for; a 400 naming a bad parameter."""
    names = [g.strip() for g in q.get("group_by", "").split(",") if g.strip()]
    for name in names:
        if name not in GROUPS:
            raise invalid("group_by", f"`{name[:64]}` is not one of {', '.join(GROUPS)}")
    if len(set(names)) != len(names):
        raise invalid("group_by", "names a group twice")
    fmt = q.get("format", "json")
    if fmt not in ("json", "csv"):
        raise invalid("format", "must be json or csv")
    return SpendQuery(
        group_by=tuple(names),
        since=time_param("since", q.get("since")),
        until=time_param("until", q.get("until")),
        csv=fmt == "csv",
    )


def time_param(name: str, value: str | None) -> datetime.datetime | None:
    """A query parameter ``name`` holding an RFC 3339 time (UTC when it names no offset), or
    None when absent; a 400 naming it otherwise (also the request log's ``since``)."""
    if not value:
        return None
    value = value.replace(" ", "+")  # an unescaped "+" of an offset arrives as a space
    try:
        parsed = datetime.datetime.fromisoformat(value.upper().replace("Z", "+00:00"))
    except ValueError:
        raise invalid(name, "must be an RFC 3339 time such as 2026-12-01T00:00:00Z") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.UTC)


def usd(micros: int) -> str:
    """Exact decimal dollars of ``micros`` (six places), for CSV."""
    sign = "-" if micros < 0 else ""
    whole, frac = divmod(abs(micros), 1_000_000)
    return f"{sign}{whole}.{frac:06d}"


def columns(group_by: Sequence[str]) -> list[str]:
    return [*group_by, *(name for name, _ in SUMS), "cost_usd"]


def to_json_rows(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [{**row, "cost_usd": row["cost_micros"] / 1_000_000} for row in rows]


def to_csv(group_by: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    header = columns(group_by)
    writer.writerow(header)
    for row in rows:
        cells = {**row, "cost_usd": usd(int(row["cost_micros"]))}
        writer.writerow(str(cells[c]) for c in header)
    return out.getvalue().encode()
