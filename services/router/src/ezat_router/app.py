"""Wiring of the router service: connections, subscriptions, health, metrics, shutdown.

``main`` connects everything (NATS, the Redis client and keys, the upstream pool) and hands the
connected collaborators to ``RouterService``, which subscribes and serves.

Shutdown (``ezat_common.lifecycle``): stop taking new requests (drain the queue-group
subscription, announce it), let in-flight responses finish for up to ``[shutdown]
drain_timeout``, tell the rest to retry, flush pending usage records, then close the HTTP session
and NATS.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping
from typing import Any

from ezat_common import (
    bus,
    environment,
    kv,
    lifecycle,
    logs,
    preflight,
    readiness,
    redis_keys,
    tracing,
)
from ezat_common.bus import Claims
from ezat_common.config import Config, ConfigError, load_config
from ezat_common.config_reload import Reloader
from ezat_common.liveness import Heartbeats
from ezat_common.subjects import QUEUE_ROUTER, Subjects, from_env
from nats.aio.client import Client

from . import metrics
from .core import kinds
from .credentials import Credentials, Providers
from .handlers import Handlers
from .routing import Router
from .shared_state import SharedState
from .upstream import Upstream, pool
from .usage_sink import UsageSink

# After the drain, cancelled requests get this long to publish their error and usage.
CANCEL_GRACE_SECONDS = 2.0
# Reported by /readyz, never a reason to be unready.
OPTIONAL = ("redis",)
REDIS_DOWN = "unreachable: routing from hashing alone"


class RouterService:
    """The router on an open NATS connection; ``start`` subscribes, ``stop`` drains."""

    def __init__(
        self,
        cfg: Config,
        nc: Client,
        subjects: Subjects,
        upstream: Upstream,
        shared: SharedState,
        region: str,
        ready: readiness.Readiness | None = None,
        signers: Mapping[str, Credentials] | None = None,
    ) -> None:
        self._nc = nc
        self.ready = ready or readiness.Readiness("router", optional=OPTIONAL)
        self._subjects = subjects
        self.region = region
        self.upstream = upstream
        self.signers = signers or {}
        self.usage_sink = UsageSink(nc, subjects)
        self.shared = shared
        self.claims = Claims(nc, subjects, "router")
        self.router = Router(
            cfg,
            nc,
            self.claims,
            self.upstream,
            self.usage_sink,
            self.shared,
            region=self.region,
            signers=self.signers,
        )
        self.beats = Heartbeats(nc)
        self.handlers = Handlers(self.router, self.beats)
        self._subs: list[Any] = []
        self.drain_timeout = cfg.shutdown.drain_timeout

    async def start(self) -> None:
        await self.claims.open()
        await self.upstream.start()
        await self.shared.start()
        self.beats.start()
        self._subs.append(
            await self._nc.subscribe(
                self._subjects.route, queue=QUEUE_ROUTER, cb=self.handlers.on_route
            )
        )
        # Broadcast: every replica hears every cancel and acts on the requests it runs.
        self._subs.append(
            await self._nc.subscribe(self._subjects.cancel, cb=self.handlers.on_cancel)
        )
        self.ready.use(self.checks)
        states = self.shared.availabilities
        await bus.serve_health(self._nc, self._subjects, "router", self.ready.problem, states)

    async def checks(self) -> dict[str, str]:
        """Readiness: NATS and both subscriptions. Redis is reported, never required: without
        it routing goes on from hashing and local health (docs/routing.md)."""
        out = readiness.nats_check(self._nc, *self._subs)
        if self.shared.configured:
            out["redis"] = readiness.OK if self.shared.up else REDIS_DOWN
        return out

    async def stop(self) -> None:
        route, cancel = self._subs
        started = time.monotonic()
        await self.ready.stop()
        # drain, not unsubscribe: requests already delivered to this replica still run.
        await lifecycle.stop_taking(route)
        tasks = set(self.handlers.tasks.values())
        if tasks:
            _, tasks = await asyncio.wait(tasks, timeout=self.drain_timeout)
        lifecycle.drain_log("router", len(tasks), started)
        if tasks:
            self.router.stopping = True
            for task in tasks:
                task.cancel()
            await asyncio.wait(tasks, timeout=CANCEL_GRACE_SECONDS)
        with contextlib.suppress(Exception):
            await cancel.unsubscribe()
        await self.beats.stop()
        await self.usage_sink.drain(CANCEL_GRACE_SECONDS)
        await self.upstream.close()
        await self.shared.close()
        for credentials in self.signers.values():
            await credentials.close()


async def signing(cfg: Config) -> dict[str, Credentials]:
    """The started credentials of every deployment signed per request (SigV4) or by a refreshed
    token (Google), by name; static keys live in each Endpoint's request head. A deployment
    whose credentials cannot be had stops the start with a ``ConfigError`` naming it
    (docs/routing.md, "Credentials")."""
    providers = Providers()
    signers = {}
    for dep in cfg.deployments:
        wire = kinds.wire(dep)
        if wire.auth in ("sigv4", "google"):
            signers[dep.name] = providers.credentials_for(dep, wire)
    await asyncio.gather(*(c.start() for c in signers.values()))
    metrics.watch_credentials(signers)
    return signers


async def main(stop: asyncio.Event) -> None:
    log = logs.setup("router")
    tracing.setup("router")
    cfg = load_config()
    # Before connecting anything: a deployment whose key variable is unset would only show as
    # a breaker opening on its first request (README.md, "Operating it": `ezat check`).
    missing = preflight.missing_keys(cfg)
    if missing:
        raise ConfigError("; ".join(missing))
    region = environment.router_region() or cfg.router.region
    shared = SharedState(
        cfg.router,
        region,
        [d.name for d in cfg.deployments],
        kv.from_env(timeout=cfg.router.redis_timeout),
        redis_keys.from_env(),
        time.time,
    )
    ready = readiness.Readiness("router", optional=OPTIONAL)
    # Before connecting: credentials that cannot be had stop the start with one line.
    signers = await signing(cfg)
    nc = await bus.connect("router")
    # After the connection: a replacement started early (a rolling restart) waits there for its
    # predecessor to stop, and only then may it take the same metrics port.
    readiness.serve(environment.router_metrics_listen() or cfg.router.metrics_listen, ready)
    upstream = Upstream(cfg.router, pool(cfg.router))
    service = RouterService(cfg, nc, from_env(), upstream, shared, region, ready, signers)
    await service.start()
    # Upstream keys are read per deployment at its endpoint's making: a reload needs them set.
    reloader = Reloader("router", cfg, service.router.reload, check=preflight.missing_keys)
    reloader.install(asyncio.get_running_loop())
    log.info(
        "router ready",
        extra={
            "fields": {
                "deployments": len(cfg.deployments),
                "region": region,
                "redis": service.shared.up,
            }
        },
    )
    try:
        await stop.wait()
    finally:
        log.info("router stopping")
        await service.stop()
        with contextlib.suppress(Exception):
            await nc.drain()
        tracing.shutdown()
