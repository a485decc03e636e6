"""core/thresholds.py: how many budget scopes reached each soft threshold, compared exactly."""

from __future__ import annotations

import datetime

import pytest
from ezat_billing.core.thresholds import Scope, counts, label, month_bounds, reached

UTC = datetime.UTC


@pytest.mark.parametrize(
    ("budget", "spent", "threshold", "expected"),
    [
        (1_000_000, 799_999, 0.8, False),
        (1_000_000, 800_000, 0.8, True),  # at the threshold counts
        (1_000_000, 999_999, 1.0, False),
        (1_000_000, 1_000_000, 1.0, True),
        (1_000_000, 1_500_000, 1.0, True),  # overshoot (fail-open, a row counted late)
        (100, 70, 0.7, True),  # 0.7 x 100 is 70 exactly, not 70.000…01
        (0, 0, 0.8, True),  # a budget of 0 is spent from the start
        (3, 2, 0.67, False),  # 0.67 x 3 is 2.01
        (10, 13, 1.25, True),
    ],
)
def test_reached(budget: int, spent: int, threshold: float, expected: bool) -> None:
    assert reached(Scope("key", budget, spent), threshold) is expected


def test_counts_every_kind_and_threshold_zero_filled() -> None:
    scopes = [
        Scope("key", 100, 85),  # 85 %
        Scope("key", 100, 10),
        Scope("key", 100, 100),  # 100 %: counts at 0.8 too
        Scope("team", 1_000, 1_000),
    ]
    assert counts(scopes, [0.8, 1.0]) == {
        ("key", "0.8"): 2,
        ("key", "1.0"): 1,
        ("team", "0.8"): 1,
        ("team", "1.0"): 1,
    }
    assert counts([], [0.5]) == {("key", "0.5"): 0, ("team", "0.5"): 0}


def test_labels_are_the_written_decimal() -> None:
    assert [label(t) for t in (0.8, 1, 1.0, 0.95, 2)] == ["0.8", "1.0", "1.0", "0.95", "2.0"]


@pytest.mark.parametrize(
    ("now", "start", "end"),
    [
        ("2026-03-15T12:00:00", "2026-03-01", "2026-04-01"),
        ("2026-12-31T23:59:59", "2026-12-01", "2027-01-01"),
        ("2026-01-01T00:00:00", "2026-01-01", "2026-02-01"),
    ],
)
def test_month_bounds_are_the_utc_month(now: str, start: str, end: str) -> None:
    at = datetime.datetime.fromisoformat(now).replace(tzinfo=UTC).timestamp()
    bounds = month_bounds(at)
    assert [b.isoformat()[:10] for b in bounds] == [start, end]
    assert all(b.tzinfo == UTC for b in bounds)
