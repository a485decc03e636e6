"""core/body_bytes.py: body bytes held per key and per edge; a body past either limit is refused
whole, and what is released can be reserved again."""

from __future__ import annotations

import pytest
from ezat_edge.core.body_bytes import BodyBytes, Over

# (operation, key, size, what reserve answers) in order, on an edge of 10 bytes, 6 per key.
STEPS: list[tuple[str, str, int, Over | None]] = [
    ("reserve", "a", 4, None),
    ("reserve", "a", 2, None),  # exactly the key's limit
    ("reserve", "a", 1, "key"),  # one byte past it
    ("reserve", "a", 0, None),  # an empty body always fits
    ("reserve", "b", 4, None),  # edge at 10
    ("reserve", "c", 1, "edge"),  # another key, nothing of its own: the edge is full
    ("reserve", "b", 3, "key"),  # both passed: the key's limit is the one named
    ("release", "a", 4, None),
    ("reserve", "c", 4, None),  # what a released is free again
    ("release", "a", 2, None),
    ("release", "b", 4, None),
    ("release", "c", 4, None),
]


def test_reservations_follow_the_table() -> None:
    budget = BodyBytes(per_edge=10, per_key=6)
    for i, (op, key, size, expected) in enumerate(STEPS):
        if op == "reserve":
            assert budget.reserve(key, size) == expected, f"step {i}"
        else:
            budget.release(key, size)
        assert budget.held == sum(budget.by_key.values()), f"step {i}"
    assert (budget.held, budget.by_key) == (0, {})


@pytest.mark.parametrize(
    ("size", "expected"), [(6, None), (7, "key"), (11, "key")], ids=["fits", "key", "both"]
)
def test_one_body_against_the_limits(size: int, expected: Over | None) -> None:
    budget = BodyBytes(per_edge=10, per_key=6)
    assert budget.reserve("a", size) == expected
    assert budget.held == (size if expected is None else 0)


def test_a_refused_reservation_counts_nothing() -> None:
    budget = BodyBytes(per_edge=5, per_key=5)
    assert budget.reserve("a", 3) is None
    assert budget.reserve("b", 3) == "edge"
    assert (budget.held, budget.by_key) == (3, {"a": 3})
