"""The overview's series without the database (core/traffic.py; docs/console.md)."""

from __future__ import annotations

import datetime

import pytest
from ezat_common.errors import GatewayError
from ezat_edge.core import traffic

UTC = datetime.UTC
NOW = datetime.datetime(2026, 12, 5, 10, 30, 20, tzinfo=UTC)


@pytest.mark.parametrize(
    ("name", "step", "since", "until"),
    [
        ("1h", 60, "2026-12-05T09:31:00", "2026-12-05T10:31:00"),
        ("1d", 900, "2026-12-04T10:45:00", "2026-12-05T10:45:00"),
        ("30d", 86400, "2026-11-06T00:00:00", "2026-12-06T00:00:00"),
    ],
)
def test_windows(name: str, step: int, since: str, until: str) -> None:
    w = traffic.window({"window": name}, NOW)
    assert w.bucket_seconds == step
    assert w.since == datetime.datetime.fromisoformat(since).replace(tzinfo=UTC)
    assert w.until == datetime.datetime.fromisoformat(until).replace(tzinfo=UTC)


def test_default_window_is_an_hour() -> None:
    assert traffic.window({}, NOW).name == "1h"


def test_a_bad_window_is_a_400_naming_it() -> None:
    with pytest.raises(GatewayError) as err:
        traffic.window({"window": "7d"}, NOW)
    assert err.value.status == 400 and "window" in str(err.value)


def test_every_bucket_present_and_totals() -> None:
    w = traffic.window({"window": "1h"}, NOW)
    at = datetime.datetime(2026, 12, 5, 10, 29, tzinfo=UTC)
    row = {
        "at": at,
        "requests": 3,
        "errors": 1,
        "ttft_p50_ms": 12.34567,
        "ttft_p99_ms": 40.0,
        "input_tokens": 30,
        "output_tokens": 9,
        "cost_micros": 1_500,
    }
    out = traffic.to_json(w, [row])
    assert len(out["data"]) == 60
    assert out["data"][0]["at"] == "2026-12-05T09:31:00Z"
    found = next(b for b in out["data"] if b["at"] == "2026-12-05T10:29:00Z")
    assert found["ttft_p50_ms"] == 12.346 and found["cost_usd"] == 0.0015
    empty = out["data"][0]
    assert empty["requests"] == 0 and empty["ttft_p50_ms"] is None
    assert out["totals"] == {
        "requests": 3,
        "errors": 1,
        "input_tokens": 30,
        "output_tokens": 9,
        "cost_usd": 0.0015,
    }
