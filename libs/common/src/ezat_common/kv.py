"""The one way a service connects to Redis.

Redis is an optimisation in every service that uses it, never a dependency (docs/reliability.md):
the edge's limits let a request through, the translator drops kept thinking, the router routes by
hashing alone. So one policy holds for every client: each call, the connect included, is bounded by
``timeout`` and is never retried, so that a dead or stalled Redis costs a request at most one
``timeout`` (redis-py's default would retry three times with backoff, and wait 5 s to connect).

Each caller keeps its own bound, because the bound is what Redis trouble adds to its hot path:
the edge's limits 0.5 s (every limited request waits on it), the translator's thinking store
0.25 s (a tool turn waits on it, and losing the thinking only degrades), the router
``router.redis_timeout`` (0.1 s by default; every session request reads its binding), the edge's
budget holds 2 s on a waiting pool (``pooled_budget_store``: a burst must not read as an outage
where an outage refuses requests), billing's spend counters 0.5 s. Budgets may have a Redis of
their own, shared by every region (``EZAT_BUDGET_REDIS_URL``, docs/billing.md).
"""

from __future__ import annotations

from redis import asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from . import environment

# A zero or negative timeout would mean "no timeout" to the socket layer.
_SHORTEST = 0.01


def connect(url: str, *, timeout: float) -> aioredis.Redis:
    """A client for ``url`` whose every call is bounded by ``timeout`` seconds, without retries.

    Connects lazily: the first command opens the connection, so this never blocks or fails.
    """
    bound = max(timeout, _SHORTEST)
    return aioredis.from_url(
        url,
        socket_timeout=bound,
        socket_connect_timeout=bound,
        retry=Retry(NoBackoff(), 0),
        health_check_interval=0,
    )


def from_env(*, timeout: float, budgets: bool = False) -> aioredis.Redis | None:
    """A client for ``REDIS_URL`` (``budgets``: the budget store's, ``EZAT_BUDGET_REDIS_URL``
    or else ``REDIS_URL``), or None when it is unset: the caller then runs without Redis."""
    url = environment.budget_redis_url() if budgets else environment.redis_url()
    return connect(url, timeout=timeout) if url else None


def pooled_budget_store(*, timeout: float, connections: int) -> aioredis.Redis | None:
    """``from_env(budgets=True)``, but at most ``connections`` at once, a call beyond them
    waiting up to ``timeout`` for one to be free (redis-py's default pool refuses the 101st call
    at once: a burst must not read as Redis being down, where that refuses requests)."""
    url = environment.budget_redis_url()
    if not url:
        return None
    bound = max(timeout, _SHORTEST)
    pool = aioredis.BlockingConnectionPool.from_url(
        url,
        max_connections=connections,
        timeout=bound,
        socket_timeout=bound,
        socket_connect_timeout=bound,
        retry=Retry(NoBackoff(), 0),
        health_check_interval=0,
    )
    return aioredis.Redis(connection_pool=pool)
