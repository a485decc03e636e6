"""The request log: records settle once, bodies stay whole within a memory budget."""

from __future__ import annotations

from ezat_simulator.requestlog import RequestLog, shortened

BIG = "x" * 300_000  # a body over the 256 KB threshold


def test_records_are_numbered_and_settle_once() -> None:
    log = RequestLog()
    record, number = log.open("/v1/messages", {"X-Api-Key": "k"}, 1.0)
    assert (record.id, number, record.headers) == ("req_sim_1", 1, {"x-api-key": "k"})
    assert (record.outcome, log.active) == ("active", 1)
    log.close(record, "dropped", 200, 2.0)
    log.close(record, "cancelled", 499, 3.0)  # e.g. the handler cancelled after a deliberate drop
    assert (record.outcome, record.status, record.finished_at, record.cancelled_at) == (
        "dropped",
        200,
        2.0,
        None,
    )
    assert log.active == 0


def test_last_is_newest_last_and_bounded() -> None:
    log = RequestLog(size=3)
    for i in range(5):
        log.open(f"/p{i}", {}, float(i))
    assert [r.path for r in log.last(2)] == ["/p3", "/p4"]
    assert [r.path for r in log.last(100)] == ["/p2", "/p3", "/p4"]
    assert log.last(0) == [] and log.total == 5


def test_big_bodies_stay_whole_within_the_budget() -> None:
    log = RequestLog(body_budget=700_000)
    records = []
    for _ in range(3):
        record, _ = log.open("/v1/messages", {}, 0.0)
        log.keep_body(record, {"messages": [{"content": BIG}]}, 300_010)
        records.append(record)
    assert records[0].body == {"messages": [{"content": "<300000 characters>"}]}
    assert records[1].body["messages"][0]["content"] == BIG
    assert records[2].body["messages"][0]["content"] == BIG


def test_the_newest_body_stays_whole_even_over_the_budget() -> None:
    log = RequestLog(body_budget=10)
    record, _ = log.open("/v1/messages", {}, 0.0)
    log.keep_body(record, {"content": BIG}, 300_010)
    assert record.body == {"content": BIG}


def test_shortened_keeps_short_strings_and_structure() -> None:
    assert shortened({"a": ["b", "c" * 5000, 1, None]}) == {
        "a": ["b", "<5000 characters>", 1, None]
    }
