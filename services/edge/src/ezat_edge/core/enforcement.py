"""What a request held on budgets gets when the hold store (Redis) is unreachable
(docs/billing.md, "Budget holds"): each scope it would be held on (its key, when the key has a
budget; its team, when the team has one) says ``fail_closed`` or ``fail_open``, NULL meaning the
edge's ``[edge] budget_enforcement``. The stricter wins: one fail_closed scope refuses the
request (503), and it is admitted on the month's spend alone only if every scope is fail_open.
Pure: the key as authorized and the configured default."""

from __future__ import annotations

from ezat_common.db import ApiKey, Enforcement


def scopes(key: ApiKey, default: Enforcement) -> list[Enforcement]:
    """The enforcement of each scope ``key``'s requests are held on, defaults applied."""
    found: list[Enforcement] = []
    if key.monthly_budget_micros is not None:
        found.append(key.budget_enforcement or default)
    if key.team_id is not None and key.team_budget_micros is not None:
        found.append(key.team_budget_enforcement or default)
    return found


def when_unreachable(key: ApiKey, default: Enforcement) -> Enforcement:
    """``fail_closed`` if any scope of ``key`` is, else ``fail_open`` (no scope: nothing is
    held, nothing to protect)."""
    return "fail_closed" if "fail_closed" in scopes(key, default) else "fail_open"
