"""Budget soft thresholds (docs/billing.md, "Soft thresholds"): how many budget scopes (keys,
teams) have spent at least a given share of their monthly budget, for a gauge whose labels stay
bounded (the scope's kind and the threshold, never a key or a team).

A scope has reached threshold ``t`` when ``spent >= t x budget``, compared exactly (the
threshold is read as the decimal it is written as, so 0.7 of 100 is 70, not 70.000…01). A
budget of 0 is reached at every threshold: the edge refuses every request of such a scope.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction

KINDS = ("key", "team")


@dataclass(frozen=True)
class Scope:
    kind: str  # "key" or "team"
    budget_micros: int
    spent_micros: int  # the month's settled cost plus the cost of rows pending delivery


def label(threshold: float) -> str:
    """The ``threshold`` label of a threshold: 0.8 -> "0.8", 1 -> "1.0"."""
    return repr(float(threshold))


def reached(scope: Scope, threshold: float) -> bool:
    return scope.spent_micros >= scope.budget_micros * Fraction(label(threshold))


def counts(scopes: Iterable[Scope], thresholds: Sequence[float]) -> dict[tuple[str, str], int]:
    """(kind, threshold label) -> how many ``scopes`` of that kind reached that threshold; every
    pair present (0 when none), so a gauge falls back to 0 when a scope's budget is raised."""
    out = {(kind, label(t)): 0 for kind in KINDS for t in thresholds}
    for scope in scopes:
        for t in thresholds:
            if reached(scope, t):
                out[(scope.kind, label(t))] += 1
    return out


def month_bounds(now: float) -> tuple[datetime.datetime, datetime.datetime]:
    """The first instant of the UTC month of ``now`` (epoch seconds) and of the next one: the
    month a budget counts (the edge's rule, docs/billing.md)."""
    at = datetime.datetime.fromtimestamp(now, datetime.UTC)
    start = at.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    if start.month == 12:
        return start, start.replace(year=start.year + 1, month=1)
    return start, start.replace(month=start.month + 1)
