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


def hold_refused(
    key: ApiKey, team: bool, committed_micros: int, worst_micros: int, now: float
) -> GatewayError:
    """The 403 for a request whose worst case does not fit in what is left of its key's (or,
    ``team``, its team's) budget once the month's spend and the holds of the requests in
    progress (``committed_micros``) are counted: the message of ``over_budget``, saying what the
    request could cost (docs/billing.md, "Budget holds")."""
    if team:
        who = f"this key's team `{key.team_name or key.team_id}` has"
        budget = key.team_budget_micros or 0
    else:
        who, budget = "this key has", key.monthly_budget_micros or 0
    error = _refusal(who, budget, committed_micros, now, force=True)
    assert error is not None
    error.reply.message += (
        f" (this request could cost up to ${worst_micros / 1_000_000:,.4f}, more than is left; "
        "spent counts the requests still in progress; a smaller max_tokens may fit)"
    )
    return error


def _refusal(
    who: str, budget: int | None, spent_micros: int, now: float, force: bool = False
) -> GatewayError | None:
    if budget is None or (spent_micros < budget and not force):
        return None
    _, resets = month_bounds(now)
    return GatewayError(
        403,
        f"{who} used its monthly budget of ${budget / 1_000_000:,.2f} "
        f"(spent ${spent_micros / 1_000_000:,.2f}); it resets on {resets:%Y-%m-%d} 00:00 UTC, "
        "or an operator can raise it",
        type="permission_error",
    )
