"""The tenancy rules (ezat_common/tenancy.py): a key's models are its list intersected with its
team's, and a key expires at its expires_at or at the end of a rotation's overlap."""

from __future__ import annotations

import pytest
from ezat_common.db import ApiKey
from ezat_common.tenancy import allowed_models, expired, may_use, rfc3339


def key(**fields: object) -> ApiKey:
    return ApiKey(id="key_1", name="k", prefix="ezat_sk_abc", **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("own", "team", "allowed"),
    [
        (None, None, None),
        (("a", "b"), None, {"a", "b"}),
        (None, ("b", "c"), {"b", "c"}),
        (("a", "b"), ("b", "c"), {"b"}),
        (("a",), ("c",), set()),
        ((), None, set()),
        (None, (), set()),
    ],
)
def test_a_keys_models_are_its_list_intersected_with_its_teams(
    own: tuple[str, ...] | None, team: tuple[str, ...] | None, allowed: set[str] | None
) -> None:
    k = key(models=own, team_models=team)
    assert allowed_models(k) == (None if allowed is None else frozenset(allowed))
    for model in ("a", "b", "c", "d"):
        assert may_use(k, model) == (allowed is None or model in allowed)


@pytest.mark.parametrize(
    ("expires_at", "secret_valid_until", "now", "is_expired"),
    [
        (None, None, 1e12, False),
        (100.0, None, 99.9, False),
        (100.0, None, 100.0, True),
        (None, 50.0, 49.0, False),
        (None, 50.0, 50.0, True),
        (100.0, 50.0, 60.0, True),
    ],
)
def test_expiry(
    expires_at: float | None, secret_valid_until: float | None, now: float, is_expired: bool
) -> None:
    k = key(expires_at=expires_at, secret_valid_until=secret_valid_until)
    assert expired(k, now) is is_expired


def test_rfc3339_is_utc_to_the_second() -> None:
    assert rfc3339(0.7) == "1970-01-01T00:00:00Z"
    assert rfc3339(1_800_000_000) == "2027-01-15T08:00:00Z"
