"""Admission of model requests: beyond ``[edge] max_in_flight`` a new one is refused at once
(docs/reliability.md)."""

from __future__ import annotations

from ezat_common.errors import GatewayError

# Seconds an overloaded edge asks clients to wait (retry-after) before trying again.
OVERLOAD_RETRY_AFTER = 1


def overloaded() -> GatewayError:
    return GatewayError(
        529, "the gateway is overloaded; retry shortly", retry_after=OVERLOAD_RETRY_AFTER
    )


class Admission:
    """Model requests in flight; refused at once rather than queued into timeouts, so admitted
    requests go on unaffected."""

    def __init__(self, max_in_flight: int) -> None:
        self.max_in_flight = max_in_flight
        self.in_flight = 0

    def admit(self) -> bool:
        """Count one more request in flight; False (nothing counted) when full."""
        if self.in_flight >= self.max_in_flight:
            return False
        self.in_flight += 1
        return True

    def release(self) -> None:
        self.in_flight -= 1
