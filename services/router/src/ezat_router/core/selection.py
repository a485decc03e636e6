"""Which deployments to try for a request, in order.

Order: healthy deployments of the local region, healthy ones elsewhere, then the ones cooling
down (local first again) as a last resort, so a request is still attempted when every
deployment is cooling down. Within each tier the order is rendezvous (highest-random-weight)
hashing of the session key: the same key keeps landing on the same deployment (its prompt cache
lives there) while it is healthy, and when it is not, only its sessions move.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from hashlib import blake2b

from ezat_common.config import DeploymentConfig

_TWO_64 = float(2**64)


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


def ordered(
    deployments: Sequence[DeploymentConfig],
    local_region: str,
    key: str,
    cooling: Callable[[str], bool],
) -> list[DeploymentConfig]:
    """Every deployment of one model, best candidate first (see the module docstring)."""
    hashed = key.encode()

    def rank(dep: DeploymentConfig) -> tuple[bool, bool, float]:
        score = rendezvous_score(hashed, dep.name, dep.weight)
        return cooling(dep.name), dep.region != local_region, -score

    return sorted(deployments, key=rank)
