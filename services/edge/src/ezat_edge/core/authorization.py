"""What a known, unrevoked key is refused for at the moment of a request (docs/tenancy.md, "How
a request is authorized"): a key past its ``expires_at``, and a secret a rotation replaced whose
overlap has ended. Decided per request from the key the edge has cached, on the wall clock: no
database round trip, and a cache entry never outlives either bound."""

from __future__ import annotations

from typing import Literal, NamedTuple

from ezat_common.db import ApiKey
from ezat_common.errors import GatewayError
from ezat_common.tenancy import rfc3339


class Refusal(NamedTuple):
    reason: Literal["expired", "rotated"]  # the label of ezat_edge_auth_failures_total
    error: GatewayError


def refusal(key: ApiKey, now: float) -> Refusal | None:
    """The 401 of ``key`` at ``now`` (Unix seconds), or None when it may be used."""
    if key.expires_at is not None and now >= key.expires_at:
        when = rfc3339(key.expires_at)
        return _refusal("expired", f"this API key expired at {when}; ask an operator for a new one")
    until = key.secret_valid_until
    if until is not None and now >= until:
        return _refusal(
            "rotated",
            f"this API key was rotated: the secret presented stopped working at {rfc3339(until)}; "
            "use the key's new secret (ask an operator for it)",
        )
    return None


def _refusal(reason: Literal["expired", "rotated"], message: str) -> Refusal:
    return Refusal(reason, GatewayError(401, message, type="authentication_error"))
