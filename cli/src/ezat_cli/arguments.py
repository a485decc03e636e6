"""The values of the tenancy commands' options, checked before any call (docs/tenancy.md).

Pure: each reader takes the option's text and returns what the admin API takes, or raises
``ValueError`` with one line naming the option and what to write instead. ``none`` clears a
limit on `update` (the API's ``null``); ``all`` clears a model list (every model).
"""

from __future__ import annotations

import datetime
import re

from ezat_common.tenancy import rfc3339

CLEAR = "none"  # `--rpm none`, `--budget none`, `--expires never` too: the API's null
EVERY_MODEL = "all"
_DURATION = re.compile(r"(\d+)([smhdw])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def limit(option: str, text: str, *, clearable: bool = False) -> int | None:
    """``--rpm``/``--tpm``: a whole number ≥ 0 (0 refuses every request); ``none`` clears."""
    if clearable and text.strip().lower() == CLEAR:
        return None
    try:
        value = int(text)
    except ValueError:
        raise ValueError(
            f"{option}: `{text}` is not a whole number ≥ 0{_or_none(clearable)}"
        ) from None
    if value < 0:
        raise ValueError(f"{option}: must be ≥ 0 (0 refuses every request), got {value}")
    return value


def budget(option: str, text: str, *, clearable: bool = False) -> float | None:
    """``--budget``: US dollars per calendar month, ≥ 0; ``none`` clears."""
    if clearable and text.strip().lower() == CLEAR:
        return None
    try:
        value = float(text)
    except ValueError:
        raise ValueError(
            f"{option}: `{text}` is not an amount in USD ≥ 0{_or_none(clearable)}"
        ) from None
    if not value >= 0 or value == float("inf"):  # NaN fails the comparison
        raise ValueError(f"{option}: must be an amount in USD ≥ 0, got {text}")
    return value


ENFORCEMENTS = ("fail_closed", "fail_open")


def enforcement(option: str, text: str, *, clearable: bool = False) -> str | None:
    """``--enforcement``: what the scope's budget does while the hold store is unreachable,
    ``fail_closed`` or ``fail_open``; ``none`` on `update`: the edge's default again."""
    value = text.strip().lower().replace("-", "_")
    if clearable and value == CLEAR:
        return None
    if value not in ENFORCEMENTS:
        raise ValueError(
            f"{option}: `{text}` is neither fail_closed nor fail_open{_or_none(clearable)}"
        )
    return value


def models(option: str, text: str) -> list[str] | None:
    """``--models a,b``: the names, in order, without blanks or repeats; ``all``: every model."""
    if text.strip().lower() == EVERY_MODEL:
        return None
    names: list[str] = []
    for part in text.split(","):
        name = part.strip()
        if name and name not in names:
            names.append(name)
    if not names:
        raise ValueError(f"{option}: name at least one model (a,b), or `all` for every model")
    return names


def is_duration(text: str) -> bool:
    """Whether ``text`` is a duration such as 30m, 7d (not a bare number)."""
    return _DURATION.fullmatch(text.strip().lower()) is not None


def duration(option: str, text: str) -> int:
    """``--overlap 1h``: seconds, from ``<n>s|m|h|d|w`` or a bare number of seconds."""
    text = text.strip().lower()
    if text.isdigit():
        return int(text)
    match = _DURATION.fullmatch(text)
    if match is None:
        raise ValueError(f"{option}: `{text}` is not a duration such as 90s, 30m, 1h, 7d or 2w")
    return int(match.group(1)) * _UNIT_SECONDS[match.group(2)]


def expiry(option: str, text: str, now: float, *, clearable: bool = False) -> str | None:
    """``--expires 30d`` (from ``now``, Unix s) or an RFC 3339 time → RFC 3339 (UTC, seconds);
    ``never``/``none`` clears on `update`."""
    if clearable and text.strip().lower() in (CLEAR, "never"):
        return None
    if _DURATION.fullmatch(text.strip().lower()):
        try:
            return rfc3339(now + duration(option, text))
        except (OverflowError, OSError, ValueError):
            raise ValueError(f"{option}: `{text}` is too far in the future") from None
    moment = rfc3339_time(text)
    if moment is None:
        hint = ", or never" if clearable else ""
        raise ValueError(
            f"{option}: `{text}` is neither a duration (30d, 12h) nor an RFC 3339 time "
            f"such as 2027-01-31T00:00:00Z{hint}"
        )
    return rfc3339(moment)


def rfc3339_time(text: str) -> float | None:
    """Unix seconds of an RFC 3339 time with its offset (or Z); None if it is not one."""
    try:
        moment = datetime.datetime.fromisoformat(text.strip().replace("z", "Z"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    return moment.timestamp()


def _or_none(clearable: bool) -> str:
    return ", or none" if clearable else ""
