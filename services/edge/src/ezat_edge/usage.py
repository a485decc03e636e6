"""``GET /api/usage``: the calling key's own usage, answered by the billing service.

JSON by default (records, totals, totals by day and model, ``next_cursor``); with
``Accept: text/csv`` the page's records as CSV with a header row, the next page's cursor in the
``x-next-cursor`` header. The decisions are core/usage.py's; this module asks billing.
"""

from __future__ import annotations

import msgspec
from aiohttp import web
from ezat_common import bus, envelopes, usage_page
from ezat_common.db import ApiKey
from ezat_common.errors import GatewayError
from ezat_common.subjects import Subjects
from ezat_common.undecodable import undecodable

from .core.usage import refused, to_csv, to_query, wants_csv
from .responses import JSON


def unavailable() -> GatewayError:
    return GatewayError(503, "usage is unavailable right now; retry shortly", retry_after=2)


async def usage_query(
    nc: bus.Client, subjects: Subjects, key: ApiKey, request: web.Request
) -> web.Response:
    query = to_query(key.id, request.query)
    try:
        msg = await nc.request(subjects.usage_query, envelopes.encode(query), timeout=5)
        reply = usage_page.decode_usage_reply(msg.data)
    except msgspec.DecodeError as exc:
        undecodable("usage_reply", subjects.usage_query, exc)
        raise unavailable() from None
    except Exception:
        raise unavailable() from None
    match reply:
        case usage_page.UsageError() as error:
            raise refused(error)
        case usage_page.UsagePage() as page if wants_csv(request.headers.get("accept", "")):
            headers = {"x-next-cursor": page.next_cursor} if page.next_cursor else {}
            return web.Response(
                body=to_csv(page.data), content_type="text/csv", charset="utf-8", headers=headers
            )
        case page:
            return web.Response(body=usage_page.usage_page_json(page), content_type=JSON)
