"""Retry budget: extra attempts (failovers, last-resort tries) are limited so a sick fleet is
not hammered with a multiple of its normal load.

Every request deposits ``ratio`` tokens; a time floor adds ``min_per_second`` so a quiet
replica can still fail over; an extra attempt spends one token. The balance is capped at one
second's worth of floor plus ``cap`` requests' deposits, so a long healthy period does not bank
an unbounded burst. Per replica: it bounds the load this replica adds.
"""

from __future__ import annotations


class RetryBudget:
    __slots__ = ("_cap", "_last", "_min_per_second", "_ratio", "tokens")

    def __init__(
        self, ratio: float, min_per_second: float, now: float, cap_requests: int = 100
    ) -> None:
        self._ratio = max(ratio, 0.0)
        self._min_per_second = max(min_per_second, 0.0)
        self._cap = max(self._min_per_second + self._ratio * cap_requests, 1.0)
        self._last = now
        self.tokens = self._cap

    def _refill(self, now: float) -> None:
        elapsed = max(now - self._last, 0.0)
        self._last = max(now, self._last)
        self.tokens = min(self._cap, self.tokens + elapsed * self._min_per_second)

    def deposit(self, now: float) -> None:
        """One request arrived."""
        self._refill(now)
        self.tokens = min(self._cap, self.tokens + self._ratio)

    def try_spend(self, now: float) -> bool:
        """True (and one token spent) when an extra attempt is allowed now."""
        self._refill(now)
        if self.tokens >= 1.0 - 1e-9:
            self.tokens = max(self.tokens - 1.0, 0.0)
            return True
        return False
