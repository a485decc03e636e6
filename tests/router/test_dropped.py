"""The bounded memory and log rate of refused betas and fields (``core/dropped.py``, issue 26:
each distinct unknown beta sent to a Bedrock/Vertex deployment used to be kept and logged
forever)."""

from __future__ import annotations

from ezat_router.core.dropped import CAPACITY, KEY_CHARS, NAME_CHARS, NAMED, DroppedLog, Notice


def test_two_thousand_distinct_values_are_remembered_up_to_the_bound() -> None:
    log = DroppedLog()
    for i in range(2000):
        log.note((f"beta 'made-up-{i}'",), now=float(i))
        assert len(log) <= CAPACITY
    assert len(log) == CAPACITY


def test_one_line_per_interval_names_a_few_and_counts_the_rest() -> None:
    log = DroppedLog(interval=60.0)
    first = log.note(tuple(f"v{i}" for i in range(8)), now=0.0)
    assert first == Notice(named=tuple(f"v{i}" for i in range(NAMED)), suppressed=8 - NAMED)
    lines = [log.note((f"w{i}",), now=1.0 + i * 0.01) for i in range(1000)]
    assert lines == [None] * 1000  # within the interval: counted, not logged
    later = log.note(("late",), now=61.0)
    assert later == Notice(named=("late",), suppressed=1000)
    assert log.note(("again",), now=62.0) is None


def test_a_known_value_is_not_logged_again_and_stays_remembered() -> None:
    log = DroppedLog(capacity=2, interval=1.0)
    assert log.note(("a",), now=0.0) is not None
    assert log.note(("a",), now=5.0) is None
    log.note(("b",), now=10.0)
    log.note(("a",), now=20.0)  # seen again: the most recent, so "b" goes first
    log.note(("c",), now=30.0)
    assert log.note(("a",), now=40.0) is None
    assert log.note(("b",), now=50.0) is not None  # forgotten, so new again


def test_long_values_are_cut_in_memory_and_in_the_line() -> None:
    log = DroppedLog()
    notice = log.note(("x" * 10_000,), now=0.0)
    assert notice is not None and notice.named == ("x" * NAME_CHARS,)
    assert log.note(("x" * KEY_CHARS + "different tail",), now=100.0) is None
