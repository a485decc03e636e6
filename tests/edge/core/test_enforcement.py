"""core/enforcement.py: per scope, fail_closed or fail_open when the hold store is unreachable;
NULL is the edge's default; the stricter scope wins; a scope without a budget has no say."""

from __future__ import annotations

from typing import Any

import pytest
from ezat_common.db import ApiKey, Enforcement
from ezat_edge.core.enforcement import scopes, when_unreachable

CLOSED, OPEN, N = "fail_closed", "fail_open", None
B = 1_000_000  # a budget


def key(**fields: Any) -> ApiKey:
    return ApiKey(id="key_1", name="k", prefix="ezat_sk_abc", **fields)


def team(budget: int | None, enforcement: str | None, **own: Any) -> ApiKey:
    return key(
        team_id="team_1", team_budget_micros=budget, team_budget_enforcement=enforcement, **own
    )


@pytest.mark.parametrize(
    ("k", "default", "expected"),
    [
        # the key's own budget alone
        (key(monthly_budget_micros=B), CLOSED, CLOSED),
        (key(monthly_budget_micros=B), OPEN, OPEN),
        (key(monthly_budget_micros=B, budget_enforcement=OPEN), CLOSED, OPEN),
        (key(monthly_budget_micros=B, budget_enforcement=CLOSED), OPEN, CLOSED),
        (key(monthly_budget_micros=0, budget_enforcement=OPEN), CLOSED, OPEN),  # 0 is a budget
        # a key's setting without a budget of its own says nothing
        (key(budget_enforcement=CLOSED), OPEN, OPEN),
        (team(B, N, budget_enforcement=CLOSED), OPEN, OPEN),
        # the team's budget alone
        (team(B, N), CLOSED, CLOSED),
        (team(B, N), OPEN, OPEN),
        (team(B, OPEN), CLOSED, OPEN),
        (team(B, CLOSED), OPEN, CLOSED),
        (
            team(None, CLOSED, monthly_budget_micros=B),
            OPEN,
            OPEN,
        ),  # a team without a budget: no say
        # both: the stricter wins
        (team(B, CLOSED, monthly_budget_micros=B, budget_enforcement=OPEN), OPEN, CLOSED),
        (team(B, OPEN, monthly_budget_micros=B, budget_enforcement=CLOSED), OPEN, CLOSED),
        (team(B, OPEN, monthly_budget_micros=B, budget_enforcement=OPEN), CLOSED, OPEN),
        (team(B, N, monthly_budget_micros=B, budget_enforcement=OPEN), CLOSED, CLOSED),
        (team(B, OPEN, monthly_budget_micros=B), CLOSED, CLOSED),
        (team(B, N, monthly_budget_micros=B), OPEN, OPEN),
        # no budget at all: nothing held
        (key(), CLOSED, OPEN),
    ],
)
def test_the_stricter_scope_wins(k: ApiKey, default: Enforcement, expected: Enforcement) -> None:
    assert when_unreachable(k, default) == expected


def test_each_scope_with_a_budget_is_listed_key_first() -> None:
    both = team(B, OPEN, monthly_budget_micros=B)
    assert scopes(both, CLOSED) == [CLOSED, OPEN]
    assert scopes(key(), CLOSED) == []
