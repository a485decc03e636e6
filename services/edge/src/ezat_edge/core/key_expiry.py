"""The series of ``ezat_edge_key_expiry_seconds`` (docs/observability.md, "Edge"): the soonest
expiry among each team's active keys, under a bounded set of ``team`` labels.

A team's label is its name; keys without a team share "none". At most ``limit`` labels are kept,
those whose keys expire soonest (the ones an operator must act on first); every other team is
folded into "other", which carries the soonest expiry among them. So the series number at most
``limit + 1`` whatever the number of teams, and the soonest expiry of all is never hidden.
"""

from __future__ import annotations

from collections.abc import Iterable

NO_TEAM = "none"
OTHER = "other"


def soonest_by_team(rows: Iterable[tuple[str | None, float]], limit: int) -> dict[str, float]:
    """``rows``: (team name, or None for keys without a team; an expiry in Unix seconds), in any
    order, a team any number of times. Returns each kept label's soonest expiry, soonest first.
    A team named "none" or "other" shares that label (the soonest of both is kept)."""
    by_label: dict[str, float] = {}
    for team, expires_at in rows:
        label = NO_TEAM if team is None else team
        known = by_label.get(label)
        if known is None or expires_at < known:
            by_label[label] = expires_at
    # Ties broken by name: the same rows always give the same labels.
    ordered = sorted(by_label.items(), key=lambda item: (item[1], item[0]))
    kept = dict(ordered[:limit])
    if len(ordered) > limit:
        folded = ordered[limit][1]  # the rest are sorted: its first is their soonest
        kept[OTHER] = min(folded, kept.get(OTHER, folded))
    return kept


def seconds_left(expires_at: float, now: float) -> float:
    """The gauge's value: seconds until ``expires_at``; negative once it has passed."""
    return expires_at - now
