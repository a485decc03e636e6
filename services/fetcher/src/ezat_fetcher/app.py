"""Fetcher wiring: configuration, NATS subscription, health probe, metrics, graceful stop."""

from __future__ import annotations

import asyncio

from ezat_common import bus, logs, metrics
from ezat_common.config import ConfigError, FetcherConfig, load_config
from ezat_common.subjects import from_env

from .core.addresses import Network, parse_networks
from .download import Fetcher
from .handlers import FetchService


def allowed_networks(cfg: FetcherConfig) -> tuple[Network, ...]:
    try:
        return parse_networks(cfg.allow_networks)
    except ValueError as exc:
        raise ConfigError(f"fetcher.allow_networks: {exc}") from None


async def main(stop: asyncio.Event) -> None:
    log = logs.setup("fetcher")
    cfg = load_config()
    allow = allowed_networks(cfg.fetcher)
    if allow:
        # Loud on purpose: these networks bypass the public-address rule.
        log.warning("treating as public: %s", ", ".join(str(n) for n in allow))
    subjects = from_env()
    nc = await bus.connect("fetcher")
    service = FetchService(nc, subjects, Fetcher(allow))
    await service.start()
    await bus.serve_health(nc, subjects, "fetcher", service.problem)
    metrics.serve(cfg.fetcher.metrics_listen)
    log.info("fetcher ready on %s", subjects.fetch)
    await stop.wait()
    log.info("fetcher stopping")
    await service.stop(cfg.shutdown.drain_timeout)
    await nc.drain()
