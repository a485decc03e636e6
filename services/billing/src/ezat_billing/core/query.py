"""A usage query checked and normalised before it reaches SQL: times, page size, cursor."""

from __future__ import annotations

import datetime
import math

from ezat_common.usage_page import MAX_LIMIT, MIN_LIMIT
from msgspec import Struct

from .cursor import CURSOR_ERROR, InvalidCursor, Position, decode_cursor

# Python datetimes end at year 9999; anything later means "no bound" for a usage query.
_MIN_EPOCH = -62_135_596_800.0
_MAX_EPOCH = 253_402_300_799.0


class QueryError(ValueError):
    """The query cannot be answered; the message starts with the offending parameter."""


class Filters(Struct, frozen=True, kw_only=True):
    key_id: str | None
    since: datetime.datetime | None  # inclusive
    until: datetime.datetime | None  # exclusive
    model: str | None
    limit: int
    after: Position | None  # the page starts strictly after this position (newest first)
    team_id: str | None = None  # the keys that belong to this team now


def to_filters(
    key_id: str | None,
    since: float | None,
    until: float | None,
    model: str | None,
    limit: int,
    cursor: str | None,
    team_id: str | None = None,
) -> Filters:
    try:
        after = decode_cursor(cursor) if cursor else None
    except InvalidCursor:
        raise QueryError(CURSOR_ERROR) from None
    return Filters(
        key_id=key_id,
        since=_at("since", since),
        until=_at("until", until),
        model=model,
        limit=clamp_limit(limit),
        after=after,
        team_id=team_id,
    )


def clamp_limit(limit: int) -> int:
    # Out-of-range limits are clamped rather than refused: a page size is a hint, not a contract.
    return max(MIN_LIMIT, min(limit, MAX_LIMIT))


def _at(name: str, epoch: float | None) -> datetime.datetime | None:
    if epoch is None:
        return None
    if math.isnan(epoch):
        raise QueryError(f"{name}: must be a time in seconds since the epoch")
    clamped = max(_MIN_EPOCH, min(float(epoch), _MAX_EPOCH))
    return datetime.datetime.fromtimestamp(clamped, datetime.UTC)
