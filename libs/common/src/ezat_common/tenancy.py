"""Tenancy rules every service applies the same way (docs/tenancy.md): which models a key may
name, and the broadcast that tells the edges a key or team changed. Expiry and the end of a
rotation's overlap are the edge's (ezat_edge/core/authorization.py).

Pure: no I/O. A key's models are its own list intersected with its team's; ``None`` at a level
means that level allows every model.
"""

from __future__ import annotations

import datetime

import msgspec

from .db import ApiKey


class Changed(msgspec.Struct, kw_only=True, forbid_unknown_fields=False):
    """A key (``key``) or a whole team (``team``) changed: limits, models, budget, expiry,
    membership or revocation. Edges drop what their auth cache holds of it."""

    key: str | None = None
    team: str | None = None


def allowed_models(key: ApiKey) -> frozenset[str] | None:
    """The models the key may name; ``None``: every model the catalogue has."""
    own, team = key.models, key.team_models
    if own is None and team is None:
        return None
    if own is None:
        return frozenset(team or ())
    if team is None:
        return frozenset(own)
    return frozenset(own) & frozenset(team)


def rfc3339(epoch: float) -> str:
    """The form the admin API and the 401 of an expired key use (UTC, seconds)."""
    moment = datetime.datetime.fromtimestamp(epoch, datetime.UTC)
    return moment.replace(microsecond=0).isoformat().replace("+00:00", "Z")
