"""core/usage.py: the usage query a request asks for, billing's refusals, and the CSV."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from ezat_common.errors import GatewayError
from ezat_common.usage_page import UsageError, UsageItem
from ezat_edge.core.usage import CSV_COLUMNS, refused, to_csv, to_query, wants_csv


def item(**fields: Any) -> UsageItem:
    defaults: dict[str, Any] = {
        "request_id": "r",
        "model": "m",
        "api": "messages",
        "stream": False,
        "status": "complete",
        "deployment": "d",
        "region": "eu",
        "input_tokens": 0,
        "cache_read_tokens": 0,
        "cache_write_5m_tokens": 0,
        "cache_write_1h_tokens": 0,
        "output_tokens": 0,
        "reasoning_tokens": 0,
        "estimated": False,
        "cost_micros": 0,
        "cost_usd": 0.0,
        "received_at": "2025-01-01T00:00:00.000Z",
        "ttft_ms": None,
        "total_ms": None,
    }
    return UsageItem(**{**defaults, **fields})


def test_csv_has_a_header_and_one_line_per_record() -> None:
    records = [
        item(request_id="r1", status="complete", estimated=False, ttft_ms=None),
        item(request_id="r,2", status="client_closed", estimated=True, output_tokens=7),
    ]
    rows = list(csv.reader(io.StringIO(to_csv(records).decode())))
    assert rows[0] == list(CSV_COLUMNS)
    table = [dict(zip(rows[0], r, strict=True)) for r in rows[1:]]
    assert [t["request_id"] for t in table] == ["r1", "r,2"]
    assert table[0]["ttft_ms"] == "" and table[1]["estimated"] == "true"
    assert table[1]["output_tokens"] == "7"


def test_csv_columns_start_with_the_identifiers() -> None:
    assert CSV_COLUMNS[:2] == ("request_id", "received_at")
    assert sorted(CSV_COLUMNS) == sorted(f for f in UsageItem.__struct_fields__)


def test_csv_is_chosen_by_the_accept_header() -> None:
    assert wants_csv("text/csv")
    assert wants_csv("application/json;q=0.5, text/csv; charset=utf-8")
    assert not wants_csv("application/json")
    assert not wants_csv("")


def test_query_reads_times_as_rfc3339_or_unix_seconds() -> None:
    q = to_query("key_1", {"from": "2025-01-01T00:00:00Z", "to": "1735776000", "model": "m"})
    assert (q.key_id, q.since, q.until, q.model) == ("key_1", 1735689600.0, 1735776000.0, "m")
    assert q.limit == 100 and q.cursor is None and q.fresh is True
    naive = to_query("key_1", {"from": "2025-01-01T00:00:00"})
    assert naive.since == 1735689600.0  # no offset: UTC


@pytest.mark.parametrize(
    ("params", "param"),
    [
        ({"limit": "0"}, "limit"),
        ({"limit": "1001"}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"from": "yesterday"}, "from"),
        ({"to": "soon"}, "to"),
    ],
)
def test_bad_parameters_are_a_400_naming_them(params: dict[str, str], param: str) -> None:
    with pytest.raises(GatewayError) as caught:
        to_query("key_1", params)
    assert (caught.value.status, caught.value.param) == (400, param)
    assert caught.value.message.startswith(f"{param}: ")


def test_billing_refusal_names_its_parameter() -> None:
    err = refused(UsageError(error="cursor: not a cursor this API returned"))
    assert (err.status, err.param) == (400, "cursor")
    assert err.message == "cursor: not a cursor this API returned"


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"limit": "1001"}, "limit: must be an integer from 1 to 1000"),
        ({"from": "yesterday"}, "from: must be an RFC 3339 time or a Unix timestamp"),
    ],
)
def test_refusals_say_what_a_parameter_must_be(params: dict[str, str], message: str) -> None:
    with pytest.raises(GatewayError) as caught:
        to_query("key_1", params)
    assert caught.value.message == message


def test_the_limit_bounds_are_a_page_size() -> None:
    assert to_query("key_1", {"limit": "1"}).limit == 1
    assert to_query("key_1", {"limit": "1000"}).limit == 1000
