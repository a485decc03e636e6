"""Fetcher wiring: configuration, NATS subscription, health probe, the metrics port (with
/readyz and /healthz, ``ezat_common.readiness``), graceful stop."""

from __future__ import annotations

import asyncio

from ezat_common import bus, logs, readiness, tracing
from ezat_common.config import ConfigError, FetcherConfig, load_config
from ezat_common.config_reload import Reloader
from ezat_common.subjects import from_env

from .core.addresses import Network, parse_networks
from .core.fairness import Limits
from .download import Fetcher
from .handlers import FetchService


def allowed_networks(cfg: FetcherConfig) -> tuple[Network, ...]:
    try:
        return parse_networks(cfg.allow_networks)
    except ValueError as exc:
        raise ConfigError(f"fetcher.allow_networks: {exc}") from None


# Limits field -> its [fetcher] key.
_LIMIT_KEYS = {
    "total": "max_concurrent",
    "per_key": "max_per_key",
    "per_request": "max_per_request",
    "queued_per_key": "max_queued_per_key",
}


def limits(cfg: FetcherConfig) -> Limits:
    """The fair shares of the download slots; a ConfigError naming the key when unusable."""
    out = Limits(
        total=cfg.max_concurrent,
        per_key=cfg.max_per_key,
        per_request=cfg.max_per_request,
        queued_per_key=cfg.max_queued_per_key,
    )
    problem = out.problem()
    if problem is not None:
        name, why = problem
        raise ConfigError(f"fetcher.{_LIMIT_KEYS[name]}: {why}")
    return out


async def main(stop: asyncio.Event) -> None:
    log = logs.setup("fetcher")
    tracing.setup("fetcher")
    cfg = load_config()
    allow = allowed_networks(cfg.fetcher)
    shares = limits(cfg.fetcher)
    if allow:
        # Loud on purpose: these networks bypass the public-address rule.
        log.warning("treating as public: %s", ", ".join(str(n) for n in allow))
    subjects = from_env()
    ready = readiness.Readiness("fetcher")
    nc = await bus.connect("fetcher")
    # After the connection: a replacement waits there for its predecessor (router/app.py).
    readiness.serve(cfg.fetcher.metrics_listen, ready)  # "starting" until wired
    service = FetchService(nc, subjects, Fetcher(allow), limits=shares)
    await service.start()
    ready.use(service.checks)
    # Nothing of the fetcher's reloads in place ([fetcher] changes need a restart): it still
    # answers each reload, refusing a file that does not load or changes [fetcher].
    Reloader("fetcher", cfg, lambda new: None).install(asyncio.get_running_loop())
    await bus.serve_health(nc, subjects, "fetcher", ready.problem)
    log.info("fetcher ready on %s", subjects.fetch)
    await stop.wait()
    log.info("fetcher stopping")
    await ready.stop()
    await service.stop(cfg.shutdown.drain_timeout)
    await nc.drain()
    tracing.shutdown()
