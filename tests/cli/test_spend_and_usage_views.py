"""How `ezat spend` and `ezat usage` print (pure): exact dollars, totals, pending apart."""

from __future__ import annotations

import datetime
import json

import pytest
from ezat_cli import spend_cmd, usage_view

NOW = datetime.datetime(2026, 12, 5, 12, 0, tzinfo=datetime.UTC).timestamp()


def test_spend_table_has_a_total_line_in_exact_dollars() -> None:
    rows = [
        {"team": "t1", "model": "m", "requests": 2, "input_tokens": 10, "cache_read_tokens": 0,
         "cache_write_tokens": 1, "output_tokens": 5, "cost_micros": 1_000_001},
        {"team": "", "model": "m", "requests": 1, "input_tokens": 3, "cache_read_tokens": 4,
         "cache_write_tokens": 0, "output_tokens": 2, "cost_micros": 9},
    ]  # fmt: skip
    lines = spend_cmd.table(["team", "model"], rows)
    assert lines[0].split() == ["team", "model", *spend_cmd.SUMS, "cost_usd"]
    assert lines[1].split() == ["t1", "m", "2", "10", "0", "1", "5", "$1.000001"]
    assert lines[2].split()[0] == "-"  # no team
    assert lines[-1].split() == ["total", "3", "13", "4", "1", "7", "$1.000010"]


def test_spend_times_are_rfc3339_or_a_duration_ago() -> None:
    assert spend_cmd.moment("--since", "7d", NOW) == "2026-11-28T12:00:00Z"
    assert spend_cmd.moment("--since", "2026-12-01T00:00:00Z", NOW) == "2026-12-01T00:00:00Z"
    with pytest.raises(ValueError, match="--since: `yesterday`"):
        spend_cmd.moment("--since", "yesterday", NOW)


def row(status: str, awaiting: bool, cost: int) -> dict[str, object]:
    return {
        "received_at": datetime.datetime(2026, 12, 5, tzinfo=datetime.UTC),
        "request_id": f"r-{cost}",
        "key_id": "key_1",
        "model": "m",
        "status": status,
        "awaiting_delivery": awaiting,
        "input_tokens": 1,
        "cache_read_tokens": 0,
        "cache_write_5m_tokens": 1,
        "cache_write_1h_tokens": 2,
        "output_tokens": 4,
        "cost_micros": cost,
        "team_id": "team_1",
        "user_name": "alice",
        "tags": ["a", "b"],
        "session": "s",
        "client": "claude-code",
    }


def test_usage_totals_count_pending_rows_apart() -> None:
    items = [
        usage_view.item(row("complete", False, 100)),
        usage_view.item(row("complete", True, 40)),
        usage_view.item(row("failed", False, 0)),
    ]
    assert [i["status"] for i in items] == ["complete", "pending", "failed"]
    assert items[0]["cache_write_tokens"] == 3
    t = usage_view.totals(items)
    assert (t["requests"], t["cost_micros"], t["cost_usd"]) == (2, 100, "0.000100")
    assert (t["pending_requests"], t["pending_cost_micros"]) == (1, 40)
    lines = usage_view.lines(items)
    assert "team_id=team_1 user=alice session=s client=claude-code tags=a,b" in lines[0]
    assert lines[-1].startswith("total\t2 requests") and "pending=1" in lines[-1]
    assert json.loads(usage_view.as_json(items))["totals"] == t
    csv = usage_view.as_csv(items).splitlines()
    assert csv[0].split(",")[:5] == ["received_at", "request_id", "key_id", "model", "status"]
    assert '"a,b",s,claude-code' in csv[1]
    assert usage_view.lines([]) == []
