"""``GET /api/usage``: the calling key's own usage, answered by the billing service.

JSON by default (records, totals, totals by day and model, ``next_cursor``); with
``Accept: text/csv`` the page's records as CSV with a header row, the next page's cursor in the
``x-next-cursor`` header.
"""

from __future__ import annotations

import csv
import datetime
import io
from typing import Any

import msgspec
from aiohttp import web
from ezat_common import bus, envelopes
from ezat_common.db import ApiKey
from ezat_common.errors import GatewayError, invalid
from ezat_common.subjects import Subjects

from .responses import JSON


def parse_time(name: str, value: str | None) -> float | None:
    if value is None or value == "":
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        parsed = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise invalid(name, "must be an RFC 3339 time or a Unix timestamp") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=datetime.UTC)
    return parsed.timestamp()


def parse_query(key: ApiKey, request: web.Request) -> envelopes.UsageQuery:
    q = request.query
    limit_text = q.get("limit", "100")
    if not limit_text.isdigit() or not 1 <= int(limit_text) <= 1000:
        raise invalid("limit", "must be an integer from 1 to 1000")
    return envelopes.UsageQuery(
        key_id=key.id,
        since=parse_time("from", q.get("from")),
        until=parse_time("to", q.get("to")),
        model=q.get("model") or None,
        limit=int(limit_text),
        cursor=q.get("cursor") or None,
        fresh=True,  # read your own usage: rows of requests whose final event was sent
    )


async def usage_query(
    nc: bus.Client, subjects: Subjects, key: ApiKey, request: web.Request
) -> web.Response:
    query = parse_query(key, request)
    try:
        msg = await nc.request(subjects.usage_query, envelopes.encode(query), timeout=5)
    except Exception:
        raise GatewayError(
            503, "usage is unavailable right now; retry shortly", retry_after=2
        ) from None
    data = msg.data
    if data.startswith(b'{"error"'):
        problem = msgspec.json.decode(data).get("error", "bad query")
        param = problem.split(":", 1)[0]
        raise GatewayError(400, problem, param=param)
    if wants_csv(request.headers.get("accept", "")):
        page = msgspec.json.decode(data)
        headers = {"x-next-cursor": page["next_cursor"]} if page.get("next_cursor") else {}
        return web.Response(
            body=to_csv(page["data"]), content_type="text/csv", charset="utf-8", headers=headers
        )
    return web.Response(body=data, content_type=JSON)


# The page's own record schema, identifiers first: one definition for JSON and CSV.
_FIELDS = [f.name for f in msgspec.structs.fields(envelopes.UsageItem)]
CSV_COLUMNS = (
    "request_id",
    "received_at",
    *(f for f in _FIELDS if f not in ("request_id", "received_at")),
)


def wants_csv(accept: str) -> bool:
    return any(part.split(";", 1)[0].strip().lower() == "text/csv" for part in accept.split(","))


def to_csv(records: list[dict[str, Any]]) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(CSV_COLUMNS)
    for record in records:
        writer.writerow(_cell(record.get(column)) for column in CSV_COLUMNS)
    return out.getvalue().encode()


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
