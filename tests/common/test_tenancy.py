"""The tenancy rules (ezat_common/tenancy.py): a key's models are its list intersected with its
team's (expiry is tests/edge/core/test_authorization.py's)."""

from __future__ import annotations

import pytest
from ezat_common.db import ApiKey
from ezat_common.tenancy import allowed_models, rfc3339


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


def test_rfc3339_is_utc_to_the_second() -> None:
    assert rfc3339(0.7) == "1970-01-01T00:00:00Z"
    assert rfc3339(1_800_000_000) == "2027-01-15T08:00:00Z"
