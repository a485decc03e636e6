"""What a known, unrevoked key is refused for at the moment of a request (docs/tenancy.md, "How
a request is authorized"): a key past its ``expires_at``, and a secret a rotation replaced whose
overlap has ended. Decided per request from the key the edge has cached, on the wall clock: no
database round trip, and a cache entry never outlives either bound."""

from __future__ import annotations

from ezat_common.db import ApiKey
from ezat_common.errors import GatewayError
from ezat_common.tenancy import rfc3339


def refusal(key: ApiKey, now: float) -> GatewayError | None:
    """The 401 of ``key`` at ``now`` (Unix seconds), or None when it may be used."""
    if key.expires_at is not None and now >= key.expires_at:
        return GatewayError(
            401,
            f"this API key expired at {rfc3339(key.expires_at)}; ask an operator for a new one",
            type="authentication_error",
        )
    until = key.secret_valid_until
    if until is not None and now >= until:
        return GatewayError(
            401,
            f"this API key was rotated: the secret presented stopped working at {rfc3339(until)}; "
            "use the key's new secret (ask an operator for it)",
            type="authentication_error",
        )
    return None
