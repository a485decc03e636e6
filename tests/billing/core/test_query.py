"""core/query.py: a usage query checked and normalised before SQL (page size, times, cursor)."""

from __future__ import annotations

import datetime

import pytest
from ezat_billing.core.query import QueryError, to_filters
from ezat_common import usage_page

UTC = datetime.UTC


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
