"""Pure parts: the stored row, record checks, cursors, query normalisation, the public page."""

from __future__ import annotations

import datetime

import msgspec
import pytest
from ezat_billing.core.cursor import (
    CURSOR_ERROR,
    InvalidCursor,
    Position,
    decode_cursor,
    encode_cursor,
)
from ezat_billing.core.page import rfc3339, to_page
from ezat_billing.core.query import QueryError, to_filters
from ezat_billing.core.rows import MAX_TOKENS, problem_of, to_row
from ezat_common import envelopes, usage_page

from .factories import SONNET, record

UTC = datetime.UTC


def test_row_timings_are_milliseconds_since_received() -> None:
    rec = record(
        received_at=1_700_000_000.0,
        upstream_started_at=1_700_000_000.25,
        first_token_at=1_700_000_001.0,
        finished_at=1_700_000_003.5,
    )
    row = to_row(rec, SONNET, 123)
    assert row.received_at == datetime.datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)
    assert row.queued_ms == pytest.approx(250.0)
    assert row.ttft_ms == pytest.approx(1000.0)
    assert row.total_ms == pytest.approx(3500.0)
    assert row.cost_micros == 123
    assert row.prices["cache_read"] == 300_000


def test_row_without_first_token_has_no_ttft() -> None:
    rec = record(received_at=1_700_000_000.0, first_token_at=0.0, upstream_started_at=0.0)
    row = to_row(rec, SONNET, 0)
    assert row.ttft_ms is None
    assert row.queued_ms is None
    assert row.total_ms is not None


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"request_id": ""}, "request_id: "),
        ({"key_id": ""}, "key_id: "),
        ({"input_tokens": -1}, "input_tokens: "),
        ({"output_tokens": MAX_TOKENS + 1}, "output_tokens: "),
        ({"received_at": float("nan")}, "received_at: "),
        ({"finished_at": float("inf")}, "finished_at: "),
        ({"received_at": 0.0}, "received_at: "),
    ],
)
def test_unstorable_records_are_named(fields: dict[str, object], problem: str) -> None:
    found = problem_of(record(**fields))
    assert found is not None and found.startswith(problem)


def test_a_normal_record_has_no_problem() -> None:
    assert problem_of(record()) is None


def test_row_key_is_the_uid_and_falls_back_to_the_request_id() -> None:
    with_uid = to_row(record(request_id="same", uid="u1"), SONNET, 0)
    assert (with_uid.uid, with_uid.request_id) == ("u1", "same")
    legacy = to_row(record(request_id="same"), SONNET, 0)  # producer that sends no uid
    assert (legacy.uid, legacy.request_id) == ("same", "same")


def test_overlong_uid_is_refused() -> None:
    found = problem_of(record(uid="u" * 257))
    assert found is not None and found.startswith("uid: ")


def test_cursor_round_trips_to_the_microsecond() -> None:
    at = datetime.datetime(2025, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)
    pos = Position(at, "req_1")
    assert decode_cursor(encode_cursor(pos)) == pos


@pytest.mark.parametrize("cursor", ["", "not-base64!!", "AAAA", "eyJhIjoxfQ", "é"])
def test_foreign_cursors_are_refused(cursor: str) -> None:
    with pytest.raises(InvalidCursor, match=r"^cursor: not a cursor this API returned$"):
        decode_cursor(cursor)


def test_cursor_of_another_version_is_refused() -> None:
    import base64

    raw = msgspec.msgpack.encode((2, 0, "req"))
    with pytest.raises(InvalidCursor):
        decode_cursor(base64.urlsafe_b64encode(raw).decode())


def test_filters_clamp_limit_and_refuse_bad_cursor() -> None:
    assert to_filters(None, None, None, None, 0, None).limit == 1
    assert to_filters(None, None, None, None, 10**6, None).limit == usage_page.MAX_LIMIT
    with pytest.raises(QueryError, match=r"^cursor: "):
        to_filters("k", None, None, None, 10, "garbage")


def test_filters_turn_epoch_seconds_into_utc_and_clamp_the_far_future() -> None:
    f = to_filters("k", 0.0, 1e30, None, 10, None)
    assert f.since == datetime.datetime(1970, 1, 1, tzinfo=UTC)
    assert f.until is not None and f.until.year == 9999
    with pytest.raises(QueryError, match=r"^since: "):
        to_filters("k", float("nan"), None, None, 10, None)


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
    assert body["totals"]["requests"] == 0 and body["totals"]["cost_usd"] == 0.0


def test_last_page_has_no_cursor() -> None:
    page = to_page([_row(0)], 2, None, [])
    assert page.has_more is False and page.next_cursor is None


def test_error_reply_is_just_the_message() -> None:
    reply = usage_page.decode_usage_reply(
        envelopes.encode(usage_page.UsageError(error=CURSOR_ERROR))
    )
    assert reply == usage_page.UsageError(error="cursor: not a cursor this API returned")


def test_rfc3339_converts_to_utc() -> None:
    plus2 = datetime.timezone(datetime.timedelta(hours=2))
    assert rfc3339(datetime.datetime(2025, 1, 1, 2, 0, tzinfo=plus2)) == "2025-01-01T00:00:00.000Z"
