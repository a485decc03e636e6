"""Deployment health as pure state transitions: cooldowns (429) and a circuit breaker (faults).

One ``DeploymentHealth`` per deployment, immutable; every transition takes the time as an
argument and returns the next value. The adapter (``shared_state.py``) keeps the values in
Redis so that every replica sees the same ones, and in a local ``HealthBoard`` that the hot path
reads without I/O (and that keeps working alone while Redis is down).

- ``cooling``: a 429 rests the deployment until its ``retry-after`` (or a default) has passed.
- ``open``: ``breaker_failures`` consecutive faults (5xx, 529, timeouts, connect errors, broken
  streams) open the breaker for ``breaker_open_seconds``.
- ``half_open``: the open period is over; ONE request (the probe) may try the deployment. Its
  success closes the breaker, its failure opens it again for another period.
- ``up``: everything else. A success of a call started after the last failure clears all of it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from ezat_common.config import RouterConfig

Availability = Literal["up", "half_open", "cooling", "open"]

# What a client is told to wait after a fault that carried no retry-after.
FAULT_COOLDOWN = 2.0


@dataclass(frozen=True, slots=True)
class HealthPolicy:
    """The ``[router]`` health settings; ``from_config`` is the only place they are read, so
    their defaults live in ``RouterConfig`` alone."""

    breaker_failures: int
    breaker_open_seconds: float
    # A 429 without retry-after rests the deployment this long, and the client is told the same.
    cooldown_default_seconds: float
    cooldown_max_seconds: float
    # A half-open probe holds its claim this long at most (then another request may probe).
    probe_lease_seconds: float

    @classmethod
    def from_config(cls, cfg: RouterConfig) -> HealthPolicy:
        return cls(
            breaker_failures=max(cfg.breaker_failures, 1),
            breaker_open_seconds=cfg.breaker_open_seconds,
            cooldown_default_seconds=cfg.cooldown_default_seconds,
            cooldown_max_seconds=cfg.cooldown_max_seconds,
            # A probe is one request: it may take as long as a non-streamed answer may.
            probe_lease_seconds=max(cfg.first_byte_timeout, 1.0),
        )


@dataclass(frozen=True, slots=True)
class DeploymentHealth:
    cooldown_until: float = 0.0
    # Consecutive faults; reset by a success.
    failures: int = 0
    # Non-zero once the breaker tripped: open until then, half-open after it, 0 when closed.
    open_until: float = 0.0
    # When the last failure was seen: a success of a call started earlier proves nothing.
    changed_at: float = 0.0
    # A half-open probe is in flight until then (its claim); nobody else may try meanwhile.
    probe_until: float = 0.0

    @property
    def clean(self) -> bool:
        return self.cooldown_until == 0.0 and self.failures == 0 and self.open_until == 0.0


HEALTHY = DeploymentHealth()


def availability(h: DeploymentHealth, now: float) -> Availability:
    if h.open_until > now:
        return "open"
    if h.open_until > 0.0:
        return "half_open" if h.probe_until <= now else "open"
    if h.cooldown_until > now:
        return "cooling"
    return "up"


def recovers_at(h: DeploymentHealth, now: float) -> float:
    """The earliest time the deployment may be tried again (``now`` when it may be now)."""
    return max(now, h.cooldown_until, h.open_until)


def rate_limited(
    h: DeploymentHealth, now: float, seconds: float | None, policy: HealthPolicy
) -> DeploymentHealth:
    """A 429: rest for ``seconds`` (its retry-after) or the default; never shorten a rest."""
    rest = policy.cooldown_default_seconds if seconds is None else seconds
    until = now + min(max(rest, 0.0), policy.cooldown_max_seconds)
    return replace(h, cooldown_until=max(h.cooldown_until, until), changed_at=now)


def failed(
    h: DeploymentHealth, now: float, policy: HealthPolicy, failures: int | None = None
) -> DeploymentHealth:
    """A fault. ``failures`` is the shared consecutive count when one is known (Redis), else
    this board's count plus one. A failed probe (breaker already tripped) reopens at once."""
    count = h.failures + 1 if failures is None else failures
    tripped = h.open_until > 0.0
    if count >= policy.breaker_failures or tripped:
        if h.open_until > now:  # already open: concurrent failures do not extend it
            return replace(h, failures=count, changed_at=now)
        return DeploymentHealth(
            cooldown_until=h.cooldown_until,
            failures=count,
            open_until=now + policy.breaker_open_seconds,
            changed_at=now,
        )
    return replace(h, failures=count, changed_at=now)


def succeeded(h: DeploymentHealth, started_at: float) -> DeploymentHealth | None:
    """A call started at ``started_at`` answered: healthy again, or None when nothing changes
    (already clean, or the call was in flight before the last failure)."""
    if h.clean or started_at < h.changed_at:
        return None
    return HEALTHY


def probing(h: DeploymentHealth, now: float, policy: HealthPolicy) -> DeploymentHealth:
    """This replica claimed the half-open probe."""
    return replace(h, probe_until=now + policy.probe_lease_seconds)


class HealthBoard:
    """The health of every deployment as this process knows it; a missing name is healthy."""

    __slots__ = ("_state", "policy")

    def __init__(self, policy: HealthPolicy) -> None:
        self.policy = policy
        self._state: dict[str, DeploymentHealth] = {}

    def get(self, name: str) -> DeploymentHealth:
        return self._state.get(name, HEALTHY)

    def put(self, name: str, h: DeploymentHealth) -> None:
        if h.clean and h.probe_until == 0.0:
            self._state.pop(name, None)
        else:
            self._state[name] = h

    def availability(self, name: str, now: float) -> Availability:
        h = self._state.get(name)
        return "up" if h is None else availability(h, now)

    def rate_limited(self, name: str, now: float, seconds: float | None) -> DeploymentHealth:
        h = rate_limited(self.get(name), now, seconds, self.policy)
        self.put(name, h)
        return h

    def failed(self, name: str, now: float, failures: int | None = None) -> DeploymentHealth:
        h = failed(self.get(name), now, self.policy, failures)
        self.put(name, h)
        return h

    def succeeded(self, name: str, started_at: float) -> bool:
        """True when the success changed the state (a shared copy should be cleared too)."""
        h = succeeded(self.get(name), started_at)
        if h is None:
            return False
        self.put(name, h)
        return True

    def claim_probe(self, name: str, now: float) -> bool:
        h = self.get(name)
        if availability(h, now) != "half_open":
            return False
        self.put(name, probing(h, now, self.policy))
        return True
