"""`ezat apply`: the file's teams and keys against the admin API's, as an ordered list of
operations (docs/tenancy.md, "Apply from git").

Pure: ``plan(desired, teams, keys, prune=…)`` takes the parsed file and the API's current teams
and keys (JSON objects) and returns what to do, in an order the API accepts: teams created and
updated, then keys created, updated and (with ``prune``) revoked, then teams deleted. Keys are
matched by (team name, key name) among the active ones; nothing matches a revoked key. An empty
plan means the stack already is as the file says.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec
from ezat_common.names import normalise
from ezat_common.tenancy import rfc3339

from . import listings
from .arguments import rfc3339_time
from .tenancy_file import KeySpec, TeamSpec, Tenancy

Verb = Literal["create", "update", "revoke", "delete"]
LIMITS = ("models", "rpm", "tpm", "budget_usd", "budget_enforcement")
KEY_FIELDS = ("user", *LIMITS, "expires_at")


@dataclass(frozen=True)
class Op:
    verb: Verb
    kind: Literal["team", "key"]
    label: str  # `search` for a team, `search/prod` for a key (its bare name without a team)
    id: str | None = None  # the existing team or key
    team: str | None = None  # a key's team name: its id is known once the team exists
    body: dict[str, Any] = field(default_factory=dict)  # what to send; null clears
    changes: tuple[str, ...] = ()  # `rpm 600 -> 700`, for the printed plan

    def describe(self) -> str:
        what = f"{self.verb} {self.kind} {self.label}"
        if self.id:
            what += f" ({self.id})"
        if self.changes:
            what += ": " + ", ".join(self.changes)
        return what


class PlanError(ValueError):
    """The stack is in a state the file cannot be applied to (one line)."""


def plan(
    desired: Tenancy,
    teams: Sequence[Mapping[str, Any]],
    keys: Sequence[Mapping[str, Any]],
    *,
    prune: bool = False,
) -> list[Op]:
    by_name = {str(t["name"]): t for t in teams}
    team_names = {str(t["id"]): str(t["name"]) for t in teams}
    current = _active_keys(keys, team_names)
    wanted_teams = {t.name for t in desired.teams}
    wanted_keys = {(k.team, k.name) for k in desired.keys}

    ops: list[Op] = []
    for team_spec in desired.teams:
        ops.extend(_team_ops(team_spec, by_name.get(team_spec.name)))
    ops.sort(key=lambda op: op.verb != "create")  # stable: creates first, then updates
    for spec in desired.keys:
        found = current.get((spec.team, spec.name), [])
        if len(found) > 1:
            ids = ", ".join(str(k["id"]) for k in found)
            raise PlanError(
                f"key {_label(spec.team, spec.name)} matches {len(found)} active keys ({ids}): "
                "revoke all but one (ezat keys revoke ID), then apply again"
            )
        ops.extend(_key_ops(spec, found[0] if found else None))
    if prune:
        for (owner, name), found in current.items():
            if (owner, name) not in wanted_keys:
                ops.extend(Op("revoke", "key", _label(owner, name), id=str(k["id"])) for k in found)
        for team in teams:
            if team["name"] not in wanted_teams:
                ops.append(Op("delete", "team", str(team["name"]), id=str(team["id"])))
    return ops


def model_names(catalogue: Any) -> dict[str, str]:
    """Each id and alias of the edge's public catalogue (``GET /api/models``), as compared
    (trimmed, lower case), → the model's id."""
    names: dict[str, str] = {}
    entries = catalogue.get("data") if isinstance(catalogue, dict) else None
    for model in entries if isinstance(entries, list) else []:
        if isinstance(model, dict) and isinstance(model.get("id"), str):
            for name in [model["id"], *model.get("aliases", [])]:
                names[normalise(str(name))] = model["id"]
    return names


def with_model_ids(desired: Tenancy, names: Mapping[str, str]) -> Tenancy:
    """The file with every model named by its id, as the API stores it (so an alias in the file
    is no change on the next run); a name the catalogue lacks is refused here, before any call."""

    def ids(where: str, models: list[str] | None) -> list[str] | None:
        if models is None:
            return None
        found: list[str] = []
        for name in models:
            model = names.get(normalise(name))
            if model is None:
                raise PlanError(
                    f"{where}: no model `{name}` in the gateway's catalogue "
                    "(GET /api/models lists them)"
                )
            if model not in found:
                found.append(model)
        return found

    teams = [
        msgspec.structs.replace(t, models=ids(f"team {t.name}", t.models)) for t in desired.teams
    ]
    keys = [
        msgspec.structs.replace(k, models=ids(f"key {_label(k.team, k.name)}", k.models))
        for k in desired.keys
    ]
    return Tenancy(teams=teams, keys=keys)


def _active_keys(
    keys: Sequence[Mapping[str, Any]], team_names: Mapping[str, str]
) -> dict[tuple[str | None, str], list[Mapping[str, Any]]]:
    found: dict[tuple[str | None, str], list[Mapping[str, Any]]] = {}
    for key in keys:
        if listings.key_state(key, now=0) == "revoked":
            continue
        team_id = listings.key_team(key)
        team = team_names.get(team_id, team_id) if team_id else None
        found.setdefault((team, str(key["name"])), []).append(key)
    return found


def _team_ops(spec: TeamSpec, team: Mapping[str, Any] | None) -> list[Op]:
    wanted = {name: getattr(spec, name) for name in LIMITS}
    if team is None:
        body = {"name": spec.name, **_given(wanted)}
        return [Op("create", "team", spec.name, body=body, changes=_settings(wanted))]
    body, changes = _differences(wanted, team)
    if not body:
        return []
    return [Op("update", "team", spec.name, id=str(team["id"]), body=body, changes=changes)]


def _key_ops(spec: KeySpec, key: Mapping[str, Any] | None) -> list[Op]:
    wanted = {name: getattr(spec, name) for name in KEY_FIELDS}
    if spec.expires_at is not None:
        wanted["expires_at"] = rfc3339(spec.expires_at.timestamp())
    label = _label(spec.team, spec.name)
    if key is None:
        body = {"name": spec.name, **_given(wanted)}
        return [Op("create", "key", label, team=spec.team, body=body, changes=_settings(wanted))]
    body, changes = _differences(wanted, key)
    if not body:
        return []
    return [Op("update", "key", label, id=str(key["id"]), body=body, changes=changes)]


def _differences(
    wanted: Mapping[str, Any], current: Mapping[str, Any]
) -> tuple[dict[str, Any], tuple[str, ...]]:
    body: dict[str, Any] = {}
    changes: list[str] = []
    for name, value in wanted.items():
        now = current.get(name)
        if _comparable(name, value) != _comparable(name, now):
            body[name] = value
            changes.append(f"{name} {_shown(name, now)} -> {_shown(name, value)}")
    return body, tuple(changes)


def _comparable(name: str, value: Any) -> Any:
    """Equal for what the API treats as the same: model sets, micro-dollars, instants."""
    if value is None:
        return None
    if name == "models":
        return tuple(sorted(set(value)))
    if name == "budget_usd":
        return round(float(value) * 1_000_000)
    if name == "expires_at":
        moment = rfc3339_time(str(value))
        return None if moment is None else round(moment)
    return value


def _shown(name: str, value: Any) -> str:
    if name == "models":
        return listings.model_list(value)
    if name == "budget_usd":
        return listings.money(value)
    if name in ("user", "expires_at", "budget_enforcement"):
        return "none" if value is None else str(value)
    return listings.shown(value)


def _given(wanted: Mapping[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in wanted.items() if value is not None}


def _settings(wanted: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(f"{name}={_shown(name, value)}" for name, value in wanted.items())


def _label(team: str | None, name: str) -> str:
    return f"{team}/{name}" if team else name
