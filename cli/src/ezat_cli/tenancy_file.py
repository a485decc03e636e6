"""The file `ezat apply -f tenancy.toml` converges to (docs/tenancy.md, "Apply from git").

Teams by name; keys by name within their team (a key's team must be one of the file's teams).
A field left out means none: no limit, every model, no expiry, the edge's budget enforcement
(``budget_enforcement``: ``fail_closed`` or ``fail_open``). Secrets are never in the file.
"""

from __future__ import annotations

import datetime
import tomllib
from pathlib import Path
from typing import Annotated, Literal

import msgspec

Name = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
Count = Annotated[int, msgspec.Meta(ge=0)]
Usd = Annotated[float, msgspec.Meta(ge=0)]
Enforcement = Literal["fail_closed", "fail_open"]  # left out: the edge's budget_enforcement


class TeamSpec(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    name: Name
    models: list[Name] | None = None
    rpm: Count | None = None
    tpm: Count | None = None
    budget_usd: Usd | None = None
    budget_enforcement: Enforcement | None = None


class KeySpec(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    name: Name
    team: Name | None = None
    user: Name | None = None
    models: list[Name] | None = None
    rpm: Count | None = None
    tpm: Count | None = None
    budget_usd: Usd | None = None
    budget_enforcement: Enforcement | None = None
    expires_at: datetime.datetime | None = None


class Tenancy(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    teams: list[TeamSpec] = msgspec.field(default_factory=list)
    keys: list[KeySpec] = msgspec.field(default_factory=list)


class FileError(ValueError):
    """What is wrong with the file, one line naming the place."""


def load(path: Path) -> Tenancy:
    try:
        data = tomllib.loads(path.read_text())
    except OSError as exc:
        raise FileError(f"{path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise FileError(f"{path}: {exc}") from None
    return parse(data, str(path))


def parse(data: object, where: str) -> Tenancy:
    try:
        tenancy = msgspec.convert(data, Tenancy)
    except msgspec.ValidationError as exc:
        hint = " (fail_closed or fail_open)" if "budget_enforcement`" in str(exc) else ""
        raise FileError(f"{where}: {exc}{hint}") from None
    _check(tenancy, where)
    return tenancy


def _check(tenancy: Tenancy, where: str) -> None:
    teams = [t.name for t in tenancy.teams]
    for i, name in enumerate(teams):
        if name in teams[:i]:
            raise FileError(f"{where}: team `{name}` is listed twice - at `$.teams[{i}]`")
    seen: set[tuple[str | None, str]] = set()
    for i, key in enumerate(tenancy.keys):
        at = f"at `$.keys[{i}]`"
        if key.team is not None and key.team not in teams:
            raise FileError(
                f"{where}: key `{key.name}` names team `{key.team}`, which the "
                f"file does not list under [[teams]] - {at}"
            )
        if (key.team, key.name) in seen:
            raise FileError(f"{where}: key `{key.name}` is listed twice in its team - {at}")
        seen.add((key.team, key.name))
        if key.expires_at is not None and key.expires_at.tzinfo is None:
            raise FileError(
                f"{where}: key `{key.name}`: expires_at needs an offset or Z "
                f"(2027-01-31T00:00:00Z) - {at}"
            )
