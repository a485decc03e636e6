"""The edge's billing pieces without a socket: the budget decision and the usage CSV."""

from __future__ import annotations

import csv
import datetime
import io

from ezat_common.db import ApiKey
from ezat_edge.budgets import month_bounds, over_budget
from ezat_edge.usage import CSV_COLUMNS, to_csv, wants_csv

NOW = datetime.datetime(2025, 12, 31, 23, 59, tzinfo=datetime.UTC).timestamp()


def key(budget: int | None) -> ApiKey:
    return ApiKey(id="key_1", name="k", prefix="ezat_sk_abc", monthly_budget_micros=budget)


def test_month_bounds_roll_over_the_year() -> None:
    start, end = month_bounds(NOW)
    assert (start.isoformat(), end.isoformat()) == (
        "2025-12-01T00:00:00+00:00",
        "2026-01-01T00:00:00+00:00",
    )


def test_budget_reached_is_a_403_that_says_so() -> None:
    assert over_budget(key(None), 10**9, NOW) is None
    assert over_budget(key(5_000_000), 4_999_999, NOW) is None
    error = over_budget(key(5_000_000), 5_000_000, NOW)
    assert error is not None and (error.status, error.type) == (403, "permission_error")
    assert error.message.startswith("this key has used its monthly budget of $5.00 (spent $5.00)")
    assert "resets on 2026-01-01 00:00 UTC" in error.message


def test_csv_has_a_header_and_one_line_per_record() -> None:
    records = [
        {"request_id": "r1", "status": "complete", "estimated": False, "ttft_ms": None},
        {"request_id": "r,2", "status": "client_closed", "estimated": True, "output_tokens": 7},
    ]
    rows = list(csv.reader(io.StringIO(to_csv(records).decode())))
    assert rows[0] == list(CSV_COLUMNS)
    table = [dict(zip(rows[0], r, strict=True)) for r in rows[1:]]
    assert [t["request_id"] for t in table] == ["r1", "r,2"]
    assert table[0]["ttft_ms"] == "" and table[1]["estimated"] == "true"
    assert table[1]["output_tokens"] == "7"


def test_csv_is_chosen_by_the_accept_header() -> None:
    assert wants_csv("text/csv")
    assert wants_csv("application/json;q=0.5, text/csv; charset=utf-8")
    assert not wants_csv("application/json")
    assert not wants_csv("")
