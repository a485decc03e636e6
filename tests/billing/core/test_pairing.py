"""Pairing complete records with their delivery confirmations in the drain (core/pairing.py,
docs/billing.md): one confirmed row instead of an INSERT and an UPDATE, never a record lost."""

from __future__ import annotations

import msgspec
from ezat_billing.core.pairing import Pairing
from ezat_billing.core.rows import UsageRow

from .. import factories


def row(uid: str, status: str = "complete") -> UsageRow:
    return factories.row(uid=uid, request_id=f"r-{uid}", status=status)


def uids(rows: list[UsageRow]) -> list[tuple[str, bool]]:
    return [(r.uid, r.awaiting_delivery) for r in rows]


def test_a_record_and_its_confirmation_in_one_batch_are_one_confirmed_row() -> None:
    p: Pairing[str] = Pairing(hold=0.25)
    b = p.round([(row("a"), "m-a")], ["a"], now=0.0)
    assert uids(b.rows) == [("a", False)] and b.tokens == ["m-a"]
    assert b.matched == ["a"] and b.unmatched == [] and len(p) == 0


def test_a_confirmation_in_the_next_batch_finds_its_waiting_record() -> None:
    p: Pairing[str] = Pairing(hold=0.25)
    first = p.round([(row("a"), "m-a")], [], now=0.0)
    assert first.rows == [] and first.tokens == [] and len(p) == 1  # held, not acknowledged
    assert p.next_due == 0.25
    second = p.round([], ["a"], now=0.1)
    assert uids(second.rows) == [("a", False)] and second.tokens == ["m-a"]
    assert second.late(inserted=["a"]) == []  # no UPDATE: it went in confirmed


def test_a_record_whose_confirmation_is_late_is_stored_awaiting_and_confirmed_after() -> None:
    p: Pairing[str] = Pairing(hold=0.25)
    p.round([(row("a"), "m-a")], [], now=0.0)
    due = p.round([], [], now=0.25)
    assert uids(due.rows) == [("a", True)] and due.tokens == ["m-a"]
    late = p.round([], ["a"], now=0.5)
    assert late.rows == [] and late.unmatched == ["a"]  # applied to the stored row (UPDATE)


def test_rows_that_wait_for_nothing_are_written_at_once() -> None:
    p: Pairing[str] = Pairing()
    b = p.round([(row("f", "failed"), "m-f"), (row("c", "client_closed"), "m-c")], [], now=0.0)
    assert [r.uid for r in b.rows] == ["f", "c"] and b.tokens == ["m-f", "m-c"]
    assert len(p) == 0


def test_a_flush_stores_every_waiting_record() -> None:
    p: Pairing[str] = Pairing(hold=10.0)
    p.round([(row("a"), "m-a"), (row("b"), "m-b")], [], now=0.0)
    b = p.round([], [], now=0.01, flush=True)
    assert uids(b.rows) == [("a", True), ("b", True)] and len(p) == 0


def test_the_hold_is_bounded_in_size_oldest_first() -> None:
    p: Pairing[str] = Pairing(hold=10.0, limit=2)
    b = p.round([(row(u), f"m-{u}") for u in "abc"], [], now=0.0)
    assert uids(b.rows) == [("a", True)] and len(p) == 2


def test_a_matched_row_already_stored_still_gets_its_confirmation() -> None:
    """Stored before (billing's direct path, an earlier redelivery) and awaiting: the confirmed
    INSERT conflicts, so the confirmation is applied as an UPDATE."""
    p: Pairing[str] = Pairing()
    b = p.round([(row("a"), "m-a")], ["a", "z"], now=0.0)
    assert b.unmatched == ["z"]
    assert b.late(inserted=[]) == ["z", "a"]


def test_a_redelivered_waiting_record_is_written_as_is_and_the_wait_goes_on() -> None:
    p: Pairing[str] = Pairing()
    p.round([(row("a"), "m-a")], [], now=0.0)
    b = p.round([(row("a"), "m-a2")], [], now=0.1)
    assert uids(b.rows) == [("a", True)] and b.tokens == ["m-a2"] and len(p) == 1


def test_nothing_is_dropped_whatever_the_order() -> None:
    """Every token comes back exactly once, whatever arrives when (a property of the rounds)."""
    import random

    rng = random.Random(7)
    for _ in range(200):
        p: Pairing[str] = Pairing(hold=0.25, limit=5)
        names = [f"u{i}" for i in range(12)]
        events: list[tuple[str, str]] = [("rec", n) for n in names]
        events += [("del", n) for n in names if rng.random() < 0.8]
        rng.shuffle(events)
        tokens: list[str] = []
        now = 0.0
        for i in range(0, len(events), 3):
            chunk = events[i : i + 3]
            rows = [(row(n), f"m-{n}") for kind, n in chunk if kind == "rec"]
            dels = [n for kind, n in chunk if kind == "del"]
            now += rng.choice([0.05, 0.1, 0.3])
            tokens += p.round(rows, dels, now).tokens
        tokens += p.round([], [], now + 1.0, flush=True).tokens
        assert sorted(tokens) == sorted(f"m-{n}" for n in names)


def test_a_confirmed_row_differs_only_in_its_flag() -> None:
    p: Pairing[str] = Pairing()
    original = row("a")
    (stored,) = p.round([(original, "m")], ["a"], now=0.0).rows
    assert msgspec.structs.replace(stored, awaiting_delivery=True) == original
