"""core/rows.py: the stored row of a record (timings, key, prices) and the records it refuses."""

from __future__ import annotations

import datetime

import pytest
from ezat_billing.core.rows import MAX_TOKENS, problem_of, to_row

from ..factories import SONNET, record

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
