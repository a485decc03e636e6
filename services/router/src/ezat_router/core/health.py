"""Per-deployment cooldowns, kept in this process; the clock is passed in.

``HealthView`` is the interface the router uses, so a breaker shared between replicas (Redis,
issue #5) can replace ``Cooldowns`` without touching the callers.
"""

from __future__ import annotations

from typing import Protocol

# A deployment answering 429 rests for its retry-after, or this long when it gave none.
RATE_LIMIT_COOLDOWN = 5.0
# A deployment that could not be reached or failed (5xx, 529, dropped stream) rests this long.
FAULT_COOLDOWN = 2.0
# Upper bound on any cooldown, so a bogus retry-after cannot take a deployment out for hours.
MAX_COOLDOWN = 300.0


class HealthView(Protocol):
    def is_cooling(self, name: str, now: float) -> bool: ...

    def failed(self, name: str, now: float, cooldown: float) -> None: ...

    def succeeded(self, name: str, started_at: float) -> None: ...


class Cooldowns:
    """``name -> (cooldown start, cooldown end)``; an end in the past means healthy."""

    __slots__ = ("_state",)

    def __init__(self) -> None:
        self._state: dict[str, tuple[float, float]] = {}

    def is_cooling(self, name: str, now: float) -> bool:
        state = self._state.get(name)
        return state is not None and state[1] > now

    def failed(self, name: str, now: float, cooldown: float) -> None:
        until = now + min(max(cooldown, 0.0), MAX_COOLDOWN)
        # Concurrent failures keep the longest cooldown, never shorten one.
        previous = self._state.get(name)
        if previous is None or until > previous[1]:
            self._state[name] = (now, until)

    def succeeded(self, name: str, started_at: float) -> None:
        """A call started at ``started_at`` succeeded: end the cooldown, unless that call was
        already in flight when the deployment failed (it proves nothing about it now)."""
        state = self._state.get(name)
        if state is not None and started_at >= state[0]:
            del self._state[name]

    def remaining(self, name: str, now: float) -> float:
        state = self._state.get(name)
        return max(state[1] - now, 0.0) if state else 0.0
