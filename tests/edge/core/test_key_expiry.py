"""The labels of ezat_edge_key_expiry_seconds (ezat_edge.core.key_expiry): each team's soonest
expiry under its name, keys without a team under "none", at most ``limit`` labels (the soonest)
and every other team folded into "other" with the soonest of theirs."""

from __future__ import annotations

import pytest
from ezat_edge.core.key_expiry import NO_TEAM, OTHER, seconds_left, soonest_by_team
from hypothesis import given
from hypothesis import strategies as st

Row = tuple[str | None, float]


@pytest.mark.parametrize(
    ("rows", "limit", "labels"),
    [
        ([], 50, {}),
        ([("ml", 300.0)], 50, {"ml": 300.0}),
        ([(None, 200.0)], 50, {NO_TEAM: 200.0}),
        # The soonest of a team's keys, whatever their order.
        ([("ml", 900.0), ("ml", 300.0), ("ml", 600.0)], 50, {"ml": 300.0}),
        (
            [("ml", 300.0), ("web", 100.0), (None, 200.0)],
            50,
            {"web": 100.0, NO_TEAM: 200.0, "ml": 300.0},
        ),
        # Over the cap: the soonest teams kept, the rest one "other" with their soonest.
        (
            [("a", 400.0), ("b", 100.0), ("c", 300.0), ("d", 200.0), ("e", 500.0)],
            2,
            {"b": 100.0, "d": 200.0, OTHER: 300.0},
        ),
        # Keys without a team compete for the cap like a team.
        ([(None, 50.0), ("a", 10.0), ("b", 20.0)], 1, {"a": 10.0, OTHER: 20.0}),
        # Exactly at the cap: no "other".
        ([("a", 1.0), ("b", 2.0)], 2, {"a": 1.0, "b": 2.0}),
        # Ties broken by name, so the same rows always give the same labels.
        ([("z", 5.0), ("y", 5.0), ("x", 5.0)], 2, {"x": 5.0, "y": 5.0, OTHER: 5.0}),
        # Expired keys (in the past) are the soonest: kept first.
        ([("old", -3600.0), ("new", 86400.0)], 1, {"old": -3600.0, OTHER: 86400.0}),
        # A team named like a reserved label shares it: the soonest of both is shown.
        ([("none", 30.0), (None, 20.0)], 50, {NO_TEAM: 20.0}),
        ([("other", 30.0), ("a", 1.0), ("b", 10.0)], 1, {"a": 1.0, OTHER: 10.0}),
        ([("other", 5.0), ("a", 1.0), ("b", 10.0)], 2, {"a": 1.0, OTHER: 5.0}),
    ],
    ids=[
        "no-keys",
        "one-team",
        "no-team",
        "soonest-of-a-team",
        "teams-and-none",
        "capped",
        "none-competes",
        "at-the-cap",
        "ties",
        "expired-first",
        "team-named-none",
        "team-named-other-folded",
        "team-named-other-kept",
    ],
)
def test_rows_become_bounded_labels(rows: list[Row], limit: int, labels: dict[str, float]) -> None:
    got = soonest_by_team(rows, limit)
    assert got == labels
    assert list(got.values()) == sorted(got.values())  # soonest first


@given(
    st.lists(st.tuples(st.none() | st.sampled_from("abcdefgh"), st.floats(-1e6, 1e9)), max_size=40),
    st.integers(1, 6),
)
def test_at_most_limit_and_other_and_the_soonest_never_hidden(rows: list[Row], limit: int) -> None:
    got = soonest_by_team(rows, limit)
    assert len(got) <= limit + 1
    if rows:
        assert min(got.values()) == min(at for _, at in rows)
    for label, at in got.items():
        if label != OTHER:
            team = None if label == NO_TEAM else label
            assert at == min(a for t, a in rows if t == team)


def test_seconds_left_is_negative_once_expired() -> None:
    assert seconds_left(1000.0, 400.0) == 600.0
    assert seconds_left(1000.0, 1600.0) == -600.0
