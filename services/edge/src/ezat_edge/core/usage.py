"""``GET /api/usage`` without the socket (docs/billing.md): the query a request asks for, what a
``UsageError`` tells the client, and the CSV rendering of a page's records."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence

import msgspec
from ezat_common import envelopes, usage_page
from ezat_common.errors import GatewayError, invalid
from ezat_common.usage_page import MAX_LIMIT, MIN_LIMIT


def parse_time(name: str, value: str | None) -> float | None:
    """Parameter ``name``'s time in seconds since the epoch, from Unix seconds or RFC 3339."""
    if value is None or value == "":
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        return usage_page.parse_time(value).timestamp()
    except ValueError:
        raise invalid(name, "must be an RFC 3339 time or a Unix timestamp") from None


def to_query(key_id: str, q: Mapping[str, str]) -> envelopes.UsageQuery:
    """The usage query of the request's parameters ``q``; a 400 naming a bad one."""
    limit_text = q.get("limit", "100")
    if not limit_text.isdigit() or not MIN_LIMIT <= int(limit_text) <= MAX_LIMIT:
        raise invalid("limit", f"must be an integer from {MIN_LIMIT} to {MAX_LIMIT}")
    return envelopes.UsageQuery(
        key_id=key_id,
        since=parse_time("from", q.get("from")),
        until=parse_time("to", q.get("to")),
        model=q.get("model") or None,
        limit=int(limit_text),
        cursor=q.get("cursor") or None,
        fresh=True,  # read your own usage: rows of requests whose final event was sent
    )


def refused(err: usage_page.UsageError) -> GatewayError:
    """The 400 of a query billing refused; its message starts with the parameter's name."""
    return GatewayError(400, err.error, param=err.error.split(":", 1)[0])


# The page's own record schema, identifiers first: one definition for JSON and CSV.
_FIELDS = [f.name for f in msgspec.structs.fields(usage_page.UsageItem)]
CSV_COLUMNS = (
    "request_id",
    "received_at",
    *(f for f in _FIELDS if f not in ("request_id", "received_at")),
)


def wants_csv(accept: str) -> bool:
    return any(part.split(";", 1)[0].strip().lower() == "text/csv" for part in accept.split(","))


def to_csv(records: Sequence[usage_page.UsageItem]) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(CSV_COLUMNS)
    for record in records:
        writer.writerow(_cell(getattr(record, column)) for column in CSV_COLUMNS)
    return out.getvalue().encode()


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):  # tags: as x-ezat-tags wrote them
        return ",".join(str(v) for v in value)
    return str(value)
