"""The monthly budget rule (``api_keys.monthly_budget_micros``; docs/billing.md): the UTC month
a spend counts in, and the 403 of a key that reached its budget."""

from __future__ import annotations

import datetime

from ezat_common.db import ApiKey
from ezat_common.errors import GatewayError


def month_bounds(now: float) -> tuple[datetime.datetime, datetime.datetime]:
    """The first instant of the current UTC month and of the next one."""
    at = datetime.datetime.fromtimestamp(now, datetime.UTC)
    start = at.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    if start.month == 12:
        return start, start.replace(year=start.year + 1, month=1)
    return start, start.replace(month=start.month + 1)


def over_budget(key: ApiKey, spent_micros: int, now: float) -> GatewayError | None:
    """The 403 for a key whose month's spend reached its budget, or None."""
    return _refusal("this key has", key.monthly_budget_micros, spent_micros, now)


def team_over_budget(key: ApiKey, spent_micros: int, now: float) -> GatewayError | None:
    """The 403 for a key whose team's month's spend (all its keys) reached the team's budget,
    or None."""
    team = key.team_name or key.team_id
    return _refusal(f"this key's team `{team}` has", key.team_budget_micros, spent_micros, now)


def _refusal(who: str, budget: int | None, spent_micros: int, now: float) -> GatewayError | None:
    if budget is None or spent_micros < budget:
        return None
    _, resets = month_bounds(now)
    return GatewayError(
        403,
        f"{who} used its monthly budget of ${budget / 1_000_000:,.2f} "
        f"(spent ${spent_micros / 1_000_000:,.2f}); it resets on {resets:%Y-%m-%d} 00:00 UTC, "
        "or an operator can raise it",
        type="permission_error",
    )
