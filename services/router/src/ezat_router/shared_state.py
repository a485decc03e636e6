"""State every router replica shares through Redis: session bindings and deployment health.

Hot path: a session request costs one ``GETEX`` (read the binding and refresh its TTL); a new or
moved binding is written in the background after the answer. Health is read from the local
``HealthBoard`` only; a background loop refreshes it from Redis every ``health_sync_seconds``
(one pipelined ``HGETALL`` per deployment), so replicas agree within about that long. Health
changes (a 429, a fault, the first success after trouble) are applied locally at once and
written to Redis in the background; the consecutive-fault count is a Redis ``HINCRBY``, so
faults seen by different replicas add up.

Redis is an optimisation, never a dependency: every call is bounded by ``redis_timeout``
(``kv.py``), and after an error the hot path stops calling it until the sync loop reaches it
again. Meanwhile routing works from hashing alone (``selection``: same home on every replica while
the fleet is healthy) and health is per replica. No Redis error ever reaches a client.

Keys (``redis_keys.py``, docs/architecture.md), under the subject prefix (``ezat:`` by default):
``aff:<region>:<model>:<digest of session key>`` -> deployment name;
``health:<deployment>`` hash (``cooldown_until``, ``failures``, ``open_until``, ``changed_at``);
``probe:<deployment>`` -> the replica holding the half-open probe (``SET NX PX``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable, Coroutine, Sequence
from hashlib import blake2b
from typing import Any

from ezat_common.config import RouterConfig
from ezat_common.redis_keys import RedisKeys
from ezat_common.tasks import TaskSet, stop_task
from redis import asyncio as aioredis
from redis.exceptions import RedisError

from . import metrics
from .core.health import Availability, DeploymentHealth, HealthBoard, HealthPolicy
from .core.health import failed as after_failure

log = logging.getLogger("ezat.router.shared")

_ERRORS = (RedisError, OSError, TimeoutError)
# Health hashes outlive any state they can hold (max cooldown, open period) and then vanish.
HEALTH_KEY_TTL = 3600
_FIELDS = ("cooldown_until", "failures", "open_until", "changed_at")


def _decode_health(raw: dict[bytes, bytes]) -> DeploymentHealth:
    def num(name: str) -> float:
        try:
            return float(raw.get(name.encode(), b"0"))
        except ValueError:
            return 0.0

    return DeploymentHealth(
        cooldown_until=num("cooldown_until"),
        failures=int(num("failures")),
        open_until=num("open_until"),
        changed_at=num("changed_at"),
    )


class SharedState:
    """Bindings and health; works without Redis (``redis`` None, or Redis unreachable).

    ``redis`` is a client from ``ezat_common.kv`` (bounded by ``redis_timeout``), ``keys`` names
    what this gateway keeps in it.
    """

    def __init__(
        self,
        cfg: RouterConfig,
        region: str,
        deployments: Sequence[str],
        redis: aioredis.Redis | None,
        keys: RedisKeys,
        clock: Callable[[], float],
    ) -> None:
        self._cfg = cfg
        self._region = region
        self._keys = keys
        self._names = list(deployments)
        self._clock = clock
        self.board = HealthBoard(HealthPolicy.from_config(cfg))
        self._replica = uuid.uuid4().hex[:12]
        self._redis = redis
        # Until then, the hot path leaves Redis alone (set after an error; the sync loop clears it).
        self._down_until = 0.0
        self.up = self._redis is not None
        metrics.SHARED_STATE_UP.set(1 if self.up else 0)
        self._tasks = TaskSet()
        self._sync_task: asyncio.Task[None] | None = None

    def set_deployments(self, deployments: Sequence[str]) -> None:
        """A config reload: the deployments now configured. The health of those that stay is
        kept (breakers, cooldowns); a new one starts healthy."""
        self._names = list(deployments)

    # ---- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        if self._redis is not None:
            await self.sync_once()
            self._sync_task = asyncio.get_running_loop().create_task(self._sync_loop())

    async def close(self) -> None:
        await stop_task(self._sync_task)
        await self._tasks.wait(timeout=1.0)
        if self._redis is not None:
            with contextlib.suppress(*_ERRORS):
                await self._redis.aclose()

    # ---- Redis availability ----------------------------------------------------------------

    def _usable(self) -> aioredis.Redis | None:
        if self._redis is None or self._clock() < self._down_until:
            return None
        return self._redis

    def _failed(self, op: str, exc: BaseException) -> None:
        metrics.SHARED_STATE_ERRORS.labels(op).inc()
        # Skip Redis on the hot path for a sync period; the sync loop probes it meanwhile.
        self._down_until = self._clock() + max(self._cfg.health_sync_seconds, 0.1)
        if self.up:
            self.up = False
            metrics.SHARED_STATE_UP.set(0)
            log.warning(
                "redis unavailable, routing from hashing alone",
                extra={"fields": {"op": op, "err": type(exc).__name__}},
            )

    def _recovered(self) -> None:
        self._down_until = 0.0
        if not self.up:
            self.up = True
            metrics.SHARED_STATE_UP.set(1)
            log.info("redis reachable again, shared state resumed")

    def _background(self, work: Coroutine[Any, Any, None]) -> None:
        self._tasks.spawn(work)

    # ---- session bindings ------------------------------------------------------------------

    def _binding_key(self, model: str, session: str) -> str:
        digest = blake2b(session.encode(), digest_size=16).hexdigest()
        return self._keys.binding(self._region, model, digest)

    async def binding(self, model: str, session: str, ttl: float) -> str | None:
        """The deployment the session is bound to (TTL refreshed), or None."""
        redis = self._usable()
        if redis is None:
            return None
        try:
            value = await redis.getex(self._binding_key(model, session), ex=max(int(ttl), 1))
        except _ERRORS as exc:
            self._failed("binding_get", exc)
            return None
        self._recovered()
        return value.decode() if isinstance(value, bytes) else None

    def bind_later(self, model: str, session: str, deployment: str, ttl: float) -> None:
        redis = self._usable()
        if redis is not None:
            key = self._binding_key(model, session)
            self._background(self._bind(redis, key, deployment, ttl))

    async def _bind(self, redis: aioredis.Redis, key: str, deployment: str, ttl: float) -> None:
        try:
            await redis.set(key, deployment, ex=max(int(ttl), 1))
        except _ERRORS as exc:
            self._failed("binding_set", exc)

    # ---- health --------------------------------------------------------------------------

    def availability(self, name: str, now: float) -> Availability:
        return self.board.availability(name, now)

    def health(self, name: str) -> DeploymentHealth:
        return self.board.get(name)

    @property
    def configured(self) -> bool:
        """A Redis was given (``REDIS_URL``); ``up`` says whether it answers."""
        return self._redis is not None

    def availabilities(self) -> dict[str, str]:
        """Every deployment's availability as this replica sees it (the edge's /api/status)."""
        now = self._clock()
        return {name: self.board.availability(name, now) for name in self._names}

    def rate_limited(self, name: str, now: float, seconds: float | None) -> None:
        h = self.board.rate_limited(name, now, seconds)
        metrics.HEALTH_EVENTS.labels(name, "cooldown").inc()
        redis = self._usable()
        if redis is not None:
            fields = {"cooldown_until": h.cooldown_until, "changed_at": now}
            self._background(self._write(redis, name, fields))

    def failed(self, name: str, now: float) -> None:
        before = self.board.get(name)
        after = self.board.failed(name, now)
        self._count_transition(name, before, after)
        redis = self._usable()
        if redis is not None:
            self._background(self._failed_shared(redis, name, now))

    def succeeded(self, name: str, started_at: float) -> None:
        before = self.board.get(name)
        if not self.board.succeeded(name, started_at):
            return
        if before.open_until > 0.0:
            metrics.HEALTH_EVENTS.labels(name, "breaker_closed").inc()
            log.info("breaker closed", extra={"fields": {"deployment": name}})
        redis = self._usable()
        if redis is not None:
            self._background(self._cleared(redis, name))

    async def claim_probe(self, name: str, now: float) -> bool:
        """True when this request may be the half-open probe of ``name``."""
        if not self.board.claim_probe(name, now):
            return False
        redis = self._usable()
        if redis is None:
            return True
        lease_ms = int(self.board.policy.probe_lease_seconds * 1000)
        try:
            won = await redis.set(self._keys.probe(name), self._replica, nx=True, px=lease_ms)
        except _ERRORS as exc:
            self._failed("probe", exc)
            return True
        if not won:  # another replica probes; wait for its verdict (arrives with the sync)
            return False
        metrics.HEALTH_EVENTS.labels(name, "probe").inc()
        return True

    def _count_transition(
        self, name: str, before: DeploymentHealth, after: DeploymentHealth
    ) -> None:
        if after.open_until > 0.0 and after.open_until != before.open_until:
            metrics.HEALTH_EVENTS.labels(name, "breaker_opened").inc()
            log.warning(
                "breaker opened",
                extra={"fields": {"deployment": name, "failures": after.failures}},
            )

    async def _failed_shared(self, redis: aioredis.Redis, name: str, now: float) -> None:
        key = self._keys.health(name)
        try:
            async with redis.pipeline(transaction=True) as pipe:
                pipe.hincrby(key, "failures", 1)
                pipe.hget(key, "open_until")
                pipe.hset(key, "changed_at", now)
                pipe.expire(key, HEALTH_KEY_TTL)
                count, open_until, _, _ = await pipe.execute()
            before = self.board.get(name)
            # The shared count decides; the open period is whichever is known (here or there).
            shared = DeploymentHealth(
                cooldown_until=before.cooldown_until,
                open_until=max(float(open_until or 0.0), before.open_until),
                changed_at=now,
            )
            after = after_failure(shared, now, self.board.policy, failures=int(count))
            self.board.put(name, after)
            self._count_transition(name, before, after)
            if after.open_until != float(open_until or 0.0):
                await redis.hset(key, "open_until", after.open_until)
                await redis.delete(self._keys.probe(name))
        except _ERRORS as exc:
            self._failed("health_write", exc)

    async def _cleared(self, redis: aioredis.Redis, name: str) -> None:
        try:
            async with redis.pipeline(transaction=True) as pipe:
                pipe.hset(name=self._keys.health(name), mapping={f: 0 for f in _FIELDS})
                pipe.delete(self._keys.probe(name))
                await pipe.execute()
        except _ERRORS as exc:
            self._failed("health_write", exc)

    async def _write(self, redis: aioredis.Redis, name: str, fields: dict[str, float]) -> None:
        key = self._keys.health(name)
        try:
            async with redis.pipeline(transaction=True) as pipe:
                pipe.hset(key, mapping=fields)  # type: ignore[arg-type]
                pipe.expire(key, HEALTH_KEY_TTL)
                await pipe.execute()
        except _ERRORS as exc:
            self._failed("health_write", exc)

    # ---- sync ----------------------------------------------------------------------------

    async def sync_once(self) -> bool:
        """Replace the local board with Redis' view; False when Redis could not be read."""
        if self._redis is None:
            return False
        names = self._names  # a reload may replace the list meanwhile
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                for name in names:
                    pipe.hgetall(self._keys.health(name))
                rows = await pipe.execute()
        except _ERRORS as exc:
            self._failed("health_sync", exc)
            # Pooled connections to a Redis that went away are dead even once it is back.
            with contextlib.suppress(*_ERRORS):
                await self._redis.connection_pool.disconnect()
            return False
        self._recovered()
        for name, raw in zip(names, rows, strict=True):
            local = self.board.get(name)
            shared = _decode_health(raw) if raw else DeploymentHealth()
            if shared.open_until > 0.0 and local.open_until == 0.0:
                metrics.HEALTH_EVENTS.labels(name, "breaker_opened_elsewhere").inc()
            # A probe this replica claimed stays claimed until its answer.
            self.board.put(name, _with_probe(shared, local.probe_until))
        return True

    async def _sync_loop(self) -> None:
        interval = max(self._cfg.health_sync_seconds, 0.05)
        while True:
            await asyncio.sleep(interval)
            await self.sync_once()


def _with_probe(h: DeploymentHealth, probe_until: float) -> DeploymentHealth:
    if h.open_until == 0.0 or probe_until == 0.0:
        return h
    return DeploymentHealth(
        cooldown_until=h.cooldown_until,
        failures=h.failures,
        open_until=h.open_until,
        changed_at=h.changed_at,
        probe_until=probe_until,
    )
