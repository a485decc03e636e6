"""Which deployments to try for a request, in order, and the affinity outcome of the choice.

Candidates are the model's *available* deployments (``up``, or ``half_open`` for a probe) of the
router's region; only when none is available there, the available ones of every other region.
The home (first attempt) is chosen by the request's affinity:

- ``session``: the binding stored for the session key (``hit``) while it is available and in the
  preferred tier; otherwise rendezvous hashing of the key over the candidates (``new`` without a
  binding, ``moved`` when the binding had to be left). Hashing means every replica computes the
  same home without talking to each other, and taking a deployment out moves only its keys.
- ``prefix``: rendezvous of the stable-prefix hash (``prefix``), so repeated prompts find their
  cache; it yields to least-outstanding when its home has ``spill`` more requests in flight than
  the least loaded candidate, so one hot prompt cannot pile onto one deployment.
- ``none``: weighted least-outstanding-requests (``none``).

Failover order after the home: the other candidates by the same rendezvous (or load) order,
then the available deployments of the other regions (this request found the local ones failing).
Unavailable deployments are not candidates; they are returned separately, soonest recovering
first, for the router's last-resort decision.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from hashlib import blake2b
from typing import Literal

from ezat_common.config import DeploymentConfig

from .health import Availability

Kind = Literal["session", "prefix", "none"]
Outcome = Literal["hit", "new", "moved", "prefix", "none"]

_TWO_64 = float(2**64)
AVAILABLE: frozenset[Availability] = frozenset({"up", "half_open"})


def by_model(deployments: Iterable[DeploymentConfig]) -> dict[str, tuple[DeploymentConfig, ...]]:
    """Deployments grouped by canonical model id, in configuration order (built once)."""
    groups: dict[str, list[DeploymentConfig]] = {}
    for dep in deployments:
        groups.setdefault(dep.model, []).append(dep)
    return {model: tuple(deps) for model, deps in groups.items()}


def rendezvous_score(key: bytes, name: str, weight: int) -> float:
    """Weighted HRW score ``-weight / ln(u)``, u uniform in (0, 1) from a stable 64-bit hash.

    The largest score wins; a deployment of weight w wins about w / sum(weights) of the keys.
    """
    digest = blake2b(key + b"\x00" + name.encode(), digest_size=8).digest()
    u = (int.from_bytes(digest, "big") + 0.5) / _TWO_64
    return -weight / math.log(u)


def by_rendezvous(deployments: Iterable[DeploymentConfig], key: str) -> list[DeploymentConfig]:
    """Highest score first."""
    hashed = key.encode()
    return sorted(deployments, key=lambda d: -rendezvous_score(hashed, d.name, d.weight))


def by_load(
    deployments: Iterable[DeploymentConfig], outstanding: Callable[[str], int], tiebreak: str
) -> list[DeploymentConfig]:
    """Weighted least outstanding requests first: ``(in flight + 1) / weight``; equal loads are
    ordered by rendezvous of ``tiebreak`` (the request id) so they spread evenly."""
    hashed = tiebreak.encode()
    return sorted(
        deployments,
        key=lambda d: (
            (outstanding(d.name) + 1) / d.weight,
            -rendezvous_score(hashed, d.name, d.weight),
        ),
    )


def candidates(
    deployments: Sequence[DeploymentConfig],
    local_region: str,
    available: Callable[[str], Availability],
) -> list[DeploymentConfig]:
    """The available deployments of the local region, or else of every other region."""
    usable = [d for d in deployments if available(d.name) in AVAILABLE]
    local = [d for d in usable if d.routing_region == local_region]
    return local or usable


@dataclass(frozen=True, slots=True)
class Plan:
    # Deployments to attempt, home first; empty when none is available.
    order: list[DeploymentConfig]
    outcome: Outcome
    # The unavailable ones, soonest recovering first (for a last-resort attempt).
    resting: list[DeploymentConfig]


def plan(
    deployments: Sequence[DeploymentConfig],
    *,
    local_region: str,
    kind: Kind,
    key: str,
    bound: str | None,
    available: Callable[[str], Availability],
    outstanding: Callable[[str], int],
    recovers_at: Callable[[str], float],
    spill: int,
) -> Plan:
    pool = candidates(deployments, local_region, available)
    in_pool = {d.name for d in pool}
    # Failover may still cross regions: once this request exhausted the local candidates,
    # none of them is healthy for it.
    farther = [d for d in deployments if available(d.name) in AVAILABLE and d.name not in in_pool]
    resting = sorted(
        (d for d in deployments if available(d.name) not in AVAILABLE),
        key=lambda d: recovers_at(d.name),
    )
    if kind == "none":
        order = by_load(pool, outstanding, key) + by_load(farther, outstanding, key)
        return Plan(order, "none", resting)
    order = by_rendezvous(pool, key)
    tail = by_rendezvous(farther, key)
    if kind == "prefix":
        if order:
            least = min(outstanding(d.name) for d in order)
            if outstanding(order[0].name) - least >= spill:
                order = by_load(pool, outstanding, key)
        return Plan(order + tail, "prefix", resting)
    if bound is None:
        return Plan(order + tail, "new", resting)
    for i, dep in enumerate(order):
        if dep.name == bound:
            return Plan([dep, *order[:i], *order[i + 1 :], *tail], "hit", resting)
    return Plan(order + tail, "moved", resting)


def outcome_of(planned: Plan, kind: Kind, bound: str | None, served: str) -> Outcome:
    """The affinity outcome when ``served`` answers (a failover may change it)."""
    if kind != "session":
        return planned.outcome
    if bound is None:
        return "new"
    return "hit" if served == bound else "moved"
