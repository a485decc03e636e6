"""core/budget.py: the month a spend counts in, and the 403 of a key that used its budget."""

from __future__ import annotations

import datetime

from ezat_common.db import ApiKey
from ezat_edge.core.budget import month_bounds, over_budget

NOW = datetime.datetime(2025, 12, 31, 23, 59, tzinfo=datetime.UTC).timestamp()


def key(budget: int | None) -> ApiKey:
    return ApiKey(id="key_1", name="k", prefix="ezat_sk_abc", monthly_budget_micros=budget)


def test_month_bounds_roll_over_the_year() -> None:
    start, end = month_bounds(NOW)
    assert (start.isoformat(), end.isoformat()) == (
        "2025-12-01T00:00:00+00:00",
        "2026-01-01T00:00:00+00:00",
    )


def test_month_bounds_are_utc_whatever_the_hour() -> None:
    at = datetime.datetime(2025, 3, 1, 0, 0, 0, tzinfo=datetime.UTC).timestamp()
    start, end = month_bounds(at)
    assert (start.isoformat(), end.isoformat()) == (
        "2025-03-01T00:00:00+00:00",
        "2025-04-01T00:00:00+00:00",
    )
    assert month_bounds(at - 1)[0].month == 2


def test_budget_reached_is_a_403_that_says_so() -> None:
    assert over_budget(key(None), 10**9, NOW) is None
    assert over_budget(key(5_000_000), 4_999_999, NOW) is None
    error = over_budget(key(5_000_000), 5_000_000, NOW)
    assert error is not None and (error.status, error.type) == (403, "permission_error")
    assert error.message.startswith("this key has used its monthly budget of $5.00 (spent $5.00)")
    assert "resets on 2026-01-01 00:00 UTC" in error.message
