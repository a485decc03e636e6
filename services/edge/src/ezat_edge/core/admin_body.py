"""What the admin API accepts (docs/tenancy.md, "Admin API reference"): bodies, the actor header
and ``since``, checked and turned into the columns the store writes. Pure: the clock (``now``)
and the catalogue (``resolve``: a model name to its canonical id, None when unknown) are passed
in. Every refusal is a 400 whose message starts with the field it is about.
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Callable
from decimal import Decimal, DecimalException
from typing import Any

from ezat_common.db import ENFORCEMENTS, Enforcement
from ezat_common.errors import GatewayError, invalid

Resolve = Callable[[str], str | None]
Columns = dict[str, Any]

TEAM_FIELDS = ("name", "models", "rpm", "tpm", "budget_usd", "budget_enforcement")
KEY_FIELDS = (
    "name", "team", "user", "models", "rpm", "tpm", "budget_usd", "budget_enforcement",
    "expires_at",
)  # fmt: skip
# The column each body field is stored in (the others keep their name).
COLUMN = {"budget_usd": "monthly_budget_micros", "team": "team_id", "user": "user_name"}

NAME_MAX = 128
USER_MAX = 256
MODELS_MAX = 256
LIMIT_MAX = 2**31 - 1  # rpm and tpm are PostgreSQL integers
BUDGET_MAX = Decimal(1_000_000_000)  # USD
MICROS = Decimal(1_000_000)
MICRO_DOLLAR = Decimal("0.000001")
OVERLAP_MAX = 30 * 24 * 3600  # seconds a rotated-out secret may stay valid
ACTOR_HEADER = "x-ezat-actor"
_ACTOR = re.compile(r"[A-Za-z0-9._@-]{1,64}")
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d{1,6})?([Zz]|[+-]\d{2}:\d{2})")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class _NotFinite(float):
    """NaN or Infinity as JSON extensions spell them: kept to be refused by name."""


def _not_finite(token: str) -> _NotFinite:
    return _NotFinite("nan")


def parse(raw: bytes) -> dict[str, Any]:
    """The body as a JSON object (an empty body is ``{}``); numbers with a fraction or an
    exponent as ``Decimal``, so that a budget converts exactly."""
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw, parse_float=Decimal, parse_constant=_not_finite)
    except (ValueError, RecursionError):
        raise GatewayError(400, "body: is not valid JSON") from None
    if not isinstance(body, dict):
        raise GatewayError(400, "body: must be a JSON object")
    return body


def _known(body: dict[str, Any], fields: tuple[str, ...]) -> None:
    unknown = sorted(set(body) - set(fields))
    if unknown:
        names = ", ".join(unknown)
        allowed = f"the fields are {', '.join(fields)}" if fields else "this call takes none"
        raise GatewayError(400, f"{names}: unknown field; {allowed}", param=names)


def _text(field: str, value: Any, limit: int, *, empty: bool = False) -> str:
    if not isinstance(value, str):
        raise invalid(field, "must be a string")
    if not empty and not value.strip():
        raise invalid(field, "must not be empty")
    if len(value) > limit:
        raise invalid(field, f"must be at most {limit} characters")
    if _CONTROL.search(value):
        raise invalid(field, "must not contain control characters")
    if not _encodable(value):
        raise invalid(field, "must be valid Unicode text (no lone surrogates)")
    return value


def _encodable(value: str) -> bool:
    """JSON lets a string carry a lone surrogate, which neither PostgreSQL nor an answer can."""
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def _limit(field: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid(field, "must be a whole number >= 0 (0 refuses every request; null: none)")
    if not 0 <= value <= LIMIT_MAX:
        raise invalid(field, f"must be between 0 and {LIMIT_MAX} (null: no limit)")
    return value


def budget_micros(value: Any, field: str = "budget_usd") -> int:
    """A budget in USD (a JSON number) as integer micro-dollars, exactly."""
    if isinstance(value, bool) or not isinstance(value, int | Decimal | float):
        raise invalid(field, "must be a number of US dollars (null: no budget)")
    if isinstance(value, float):  # NaN or Infinity
        raise invalid(field, "must be a finite number of US dollars")
    try:
        usd = Decimal(value)
        if not usd.is_finite():
            raise invalid(field, "must be a finite number of US dollars")
        if usd < 0:
            raise invalid(field, "must not be negative")
        if usd > BUDGET_MAX:
            raise invalid(field, f"must be at most {BUDGET_MAX} US dollars")
        # Bounded above, so quantizing cannot overflow; a value too small for the context
        # (1e-999999999) quantizes to 0 and differs from itself: refused, never stored as 0.
        if usd != usd.quantize(MICRO_DOLLAR):
            raise invalid(field, "has more than 6 decimal places (the unit is a micro-dollar)")
        micros = usd * MICROS
    except DecimalException:
        raise invalid(field, "must be a finite number of US dollars") from None
    return int(micros)


def enforcement(value: Any) -> Enforcement:
    """What the scope's budget does while the hold store is unreachable."""
    for known in ENFORCEMENTS:
        if value == known:
            return known
    choices = " or ".join(f'"{e}"' for e in ENFORCEMENTS)
    raise invalid(
        "budget_enforcement", f"must be {choices} (null: the edge's [edge] budget_enforcement)"
    )


def _models(value: Any, resolve: Resolve) -> list[str]:
    """Canonical ids, in the order given, each once; unknown names are refused."""
    if not isinstance(value, list):
        raise invalid("models", "must be a list of model names (null: every model)")
    if len(value) > MODELS_MAX:
        raise invalid("models", f"must have at most {MODELS_MAX} entries")
    out: list[str] = []
    for i, name in enumerate(value):
        if not isinstance(name, str) or not name.strip() or not _encodable(name):
            raise invalid(f"models[{i}]", "must be a non-empty string")
        canonical = resolve(name)
        if canonical is None:
            raise invalid(
                f"models[{i}]", f"no model `{name[:128]}` in the catalogue (GET /api/models)"
            )
        if canonical not in out:
            out.append(canonical)
    return out


def expires_at(value: Any, now: datetime.datetime) -> datetime.datetime:
    if not isinstance(value, str) or not _RFC3339.fullmatch(value):
        raise invalid("expires_at", "must be an RFC 3339 time, e.g. 2027-01-31T00:00:00Z")
    moment = _moment("expires_at", value)
    if moment <= now:
        raise invalid("expires_at", "must be in the future")
    return moment


def _value(field: str, value: Any, resolve: Resolve, now: datetime.datetime) -> Any:
    """One field's column value; ``None`` (JSON null) clears it, except the name."""
    if value is None:
        if field == "name":
            raise invalid("name", "must be a string of 1 to 128 characters, not null")
        return None
    match field:
        case "name":
            return _text(field, value, NAME_MAX)
        case "user":
            return _text(field, value, USER_MAX, empty=True)
        case "team":
            return _text(field, value, NAME_MAX)
        case "models":
            return _models(value, resolve)
        case "rpm" | "tpm":
            return _limit(field, value)
        case "budget_usd":
            return budget_micros(value)
        case "budget_enforcement":
            return enforcement(value)
        case "expires_at":
            return expires_at(value, now)
    raise AssertionError(field)


def _columns(
    body: dict[str, Any],
    fields: tuple[str, ...],
    resolve: Resolve,
    now: datetime.datetime,
    *,
    create: bool,
) -> Columns:
    _known(body, fields)
    if create and "name" not in body:
        raise invalid("name", "is required")
    if not create and not body:
        raise GatewayError(400, f"body: name at least one field to change ({', '.join(fields)})")
    return {COLUMN.get(f, f): _value(f, body[f], resolve, now) for f in fields if f in body}


def team_create(body: dict[str, Any], resolve: Resolve) -> Columns:
    return _columns(body, TEAM_FIELDS, resolve, _EPOCH, create=True)


def team_patch(body: dict[str, Any], resolve: Resolve) -> Columns:
    return _columns(body, TEAM_FIELDS, resolve, _EPOCH, create=False)


def key_create(body: dict[str, Any], resolve: Resolve, now: datetime.datetime) -> Columns:
    return _columns(body, KEY_FIELDS, resolve, now, create=True)


def key_patch(body: dict[str, Any], resolve: Resolve, now: datetime.datetime) -> Columns:
    return _columns(body, KEY_FIELDS, resolve, now, create=False)


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)  # teams have no time field


def overlap_seconds(body: dict[str, Any]) -> int:
    """How long a rotated-out secret stays valid (default 0: not at all)."""
    _known(body, ("overlap_seconds",))
    value = body.get("overlap_seconds", 0)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= OVERLAP_MAX:
        raise invalid("overlap_seconds", f"must be a whole number of seconds, 0 to {OVERLAP_MAX}")
    return value


def no_fields(body: dict[str, Any]) -> None:
    """A call that takes no fields (revoke) was sent none."""
    _known(body, ())


def actor(header: str | None) -> str:
    """Who the audit log says made a write: the operator, and who they said they are."""
    if header is None:
        return "operator"
    if not _ACTOR.fullmatch(header):
        raise GatewayError(
            400,
            f"{ACTOR_HEADER}: header must be 1 to 64 of A-Z a-z 0-9 . _ @ -",
            param=ACTOR_HEADER,
        )
    return f"operator:{header}"


def since(value: str | None) -> int | datetime.datetime | None:
    """``since`` of the audit listing: a seq (entries after it) or an RFC 3339 time (entries at
    or after it)."""
    if value is None or value == "":
        return None
    if value.isascii() and value.isdigit() and len(value) <= 18:
        return int(value)
    # A "+" of an offset left unescaped in a query string arrives as a space.
    value = value.replace(" ", "+")
    if not _RFC3339.fullmatch(value):
        raise invalid("since", "must be a seq (a whole number) or an RFC 3339 time")
    return _moment("since", value)


def _moment(field: str, value: str) -> datetime.datetime:
    """An RFC 3339 time PostgreSQL can hold (in UTC: year 9999 at -01:00 is past it)."""
    try:
        moment = datetime.datetime.fromisoformat(value.upper())
        moment.astimezone(datetime.UTC)
    except (ValueError, OverflowError):
        raise invalid(field, f"`{value}` is not a valid time") from None
    return moment
