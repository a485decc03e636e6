"""How the tenancy commands print teams, keys and audit entries (docs/tenancy.md).

Pure. One tab-separated line per item, its id first. Limits are printed as they are: ``0`` is 0
(every request refused), ``none`` is no limit; ``models=all`` is every model.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ezat_common.tenancy import rfc3339

from .arguments import rfc3339_time


def shown(value: Any) -> str:
    """A limit as it is: ``none`` when absent, the number otherwise (0 included)."""
    return "none" if value is None else str(value)


def money(value: Any) -> str:
    """Dollars with cents, and the micro-dollars when there are any: ``$50.00``, ``$0.000001``."""
    if value is None:
        return "none"
    text = f"{float(value):.6f}".rstrip("0")
    return "$" + (text + "0" * (2 - len(text.split(".")[1])))


def model_list(value: Any) -> str:
    return "all" if value is None else ",".join(value) or "(none)"


def limits(item: Mapping[str, Any]) -> str:
    """The limits; the budget's enforcement only when set (else the edge's default)."""
    enforcement = item.get("budget_enforcement")
    return (
        f"rpm={shown(item.get('rpm'))} tpm={shown(item.get('tpm'))}"
        f" budget={money(item.get('budget_usd'))}"
        + (f" enforcement={enforcement}" if enforcement else "")
    )


def key_team(key: Mapping[str, Any]) -> str | None:
    """The team id of a key as the API gives it."""
    team = key.get("team", key.get("team_id"))
    if isinstance(team, dict):
        team = team.get("id")
    return team if isinstance(team, str) else None


def key_state(key: Mapping[str, Any], now: float) -> str:
    if key.get("revoked") or key.get("revoked_at"):
        return "revoked"
    expires = key.get("expires_at")
    moment = rfc3339_time(expires) if isinstance(expires, str) else None
    if moment is not None and now >= moment:
        return "expired"
    return "active"


def team_line(team: Mapping[str, Any]) -> str:
    return "\t".join(
        [
            str(team.get("id")),
            str(team.get("name")),
            limits(team),
            f"models={model_list(team.get('models'))}",
            str(team.get("created_at") or ""),
        ]
    )


def key_line(key: Mapping[str, Any], team_names: Mapping[str, str], now: float) -> str:
    team = key_team(key)
    return "\t".join(
        [
            str(key.get("id")),
            str(key.get("name")),
            f"{key.get('prefix')}…" if key.get("prefix") else "-",
            f"team={team_names.get(team, team) if team else 'none'}",
            f"user={key.get('user') or 'none'}",
            key_state(key, now),
            limits(key),
            f"models={model_list(key.get('models'))}",
            f"expires={key.get('expires_at') or 'never'}",
            str(key.get("created_at") or ""),
        ]
    )


def audit_line(entry: Mapping[str, Any]) -> str:
    at = entry.get("at")
    if isinstance(at, int | float):
        at = rfc3339(float(at))
    return "\t".join(
        [
            str(entry.get("seq")),
            str(at),
            str(entry.get("actor")),
            str(entry.get("action")),
            str(entry.get("target")),
            str(entry.get("hash", ""))[:12],
        ]
    )


def as_json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True)
