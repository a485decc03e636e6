"""core/page.py: the public page of stored rows (shape, next cursor, times in UTC)."""

from __future__ import annotations

import datetime

import msgspec
from ezat_billing.core.cursor import decode_cursor
from ezat_billing.core.page import rfc3339, to_page
from ezat_common import usage_page

UTC = datetime.UTC


def _row(i: int) -> dict[str, object]:
    return {
        "uid": f"uid_{i}",
        "request_id": f"req_{i}",
        "model": "m",
        "api": "messages",
        "stream": True,
        "status": "complete",
        "deployment": "d",
        "region": "r",
        "input_tokens": 10,
        "cache_read_tokens": 0,
        "cache_write_5m_tokens": 0,
        "cache_write_1h_tokens": 0,
        "output_tokens": 5,
        "reasoning_tokens": 1,
        "estimated": False,
        "cost_micros": 1_500_000,
        "received_at": datetime.datetime(2025, 1, 2, 3, 4, 5, 678000, tzinfo=UTC),
        "ttft_ms": 12.5,
        "total_ms": None,
        "deployment_kind": "bedrock",
        "web_search_requests": 2,
        "web_fetch_requests": 0,
    }


def test_page_shape_and_next_cursor_from_the_last_shown_row() -> None:
    rows = [_row(i) for i in range(3)]
    page = to_page(rows, 2, None, [])
    body = msgspec.json.decode(usage_page.usage_page_json(page))
    assert list(body) == ["object", "data", "totals", "by_day", "has_more", "next_cursor"]
    assert body["object"] == "list"
    assert [d["request_id"] for d in body["data"]] == ["req_0", "req_1"]
    assert body["has_more"] is True
    # The cursor's tie-break is the unique uid; request ids may repeat.
    assert decode_cursor(body["next_cursor"]).uid == "uid_1"
    assert "uid" not in body["data"][0]  # internal: the client sees its request id only
    item = body["data"][0]
    assert item["received_at"] == "2025-01-02T03:04:05.678Z"
    assert item["cost_usd"] == 1.5 and item["cost_micros"] == 1_500_000
    assert item["total_ms"] is None
    assert (item["deployment_kind"], item["web_search_requests"]) == ("bedrock", 2)
    assert body["totals"]["requests"] == 0 and body["totals"]["cost_usd"] == 0.0


def test_last_page_has_no_cursor() -> None:
    page = to_page([_row(0)], 2, None, [])
    assert page.has_more is False and page.next_cursor is None


def test_rfc3339_converts_to_utc() -> None:
    plus2 = datetime.timezone(datetime.timedelta(hours=2))
    assert rfc3339(datetime.datetime(2025, 1, 1, 2, 0, tzinfo=plus2)) == "2025-01-01T00:00:00.000Z"
