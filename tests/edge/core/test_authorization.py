"""core/authorization.py: the 401 of an expired key and of a rotated-out secret, per request."""

from __future__ import annotations

import pytest
from ezat_common.db import ApiKey
from ezat_edge.core.authorization import refusal

T = 1_800_000_000.0  # 2027-01-15T08:00:00Z
EXPIRED = "this API key expired at 2027-01-15T08:00:00Z; ask an operator for a new one"
ROTATED = (
    "this API key was rotated: the secret presented stopped working at 2027-01-15T08:00:00Z; "
    "use the key's new secret (ask an operator for it)"
)


def key(**fields: object) -> ApiKey:
    return ApiKey(id="key_1", name="k", prefix="ezat_sk_abc", **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fields", "now", "reason", "message"),
    [
        ({}, T, None, None),
        ({"expires_at": T}, T - 0.001, None, None),
        ({"expires_at": T}, T, "expired", EXPIRED),
        ({"expires_at": T}, T + 86_400, "expired", EXPIRED),
        ({"secret_valid_until": T}, T - 1, None, None),
        ({"secret_valid_until": T}, T, "rotated", ROTATED),
        # Expired outright: that is what is said, whatever secret was presented.
        ({"expires_at": T, "secret_valid_until": T - 10}, T, "expired", EXPIRED),
    ],
)
def test_refusal(
    fields: dict[str, float], now: float, reason: str | None, message: str | None
) -> None:
    refused = refusal(key(**fields), now)
    if message is None:
        assert refused is None
    else:
        assert refused is not None and refused.reason == reason
        err = refused.error
        assert (err.status, err.type, str(err)) == (401, "authentication_error", message)
