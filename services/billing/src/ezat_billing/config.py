"""Billing settings: the operator's TOML (prices come from its ``[[models]]``, and from the
``price`` of a ``[[deployments]]`` entry that has one) and a few knobs.

The acknowledgement deadline is an environment knob (``EZAT_BILLING_ACK_DEADLINE``, seconds)
because the shared ``[billing]`` table does not carry it. It bounds the wait for PostgreSQL;
past it the record goes to the JetStream outbox (``OUTBOX_TIMEOUT`` more at most). Both together
stay below the least time a holder of a final reply gives billing's request/reply (what
``DURABLE_DEADLINE`` leaves after ``ACK_TIMEOUT``, ezat_common.settlement; docs/billing.md), so
that the holder hears billing's answer rather than its own timeout, which would fail a request
whose record billing then stores.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ezat_common import environment
from ezat_common.catalogue import Catalogue, Prices
from ezat_common.config import Config, load_config
from ezat_common.settlement import ACK_TIMEOUT, DURABLE_DEADLINE

from .batcher import DEFAULT_MAX_BATCH

ENV_ACK_DEADLINE = "EZAT_BILLING_ACK_DEADLINE"
# One write attempt (a transaction) may take this long before it is abandoned and retried.
WRITE_TIMEOUT = 1.0
# How long the JetStream PubAck of the outbox may take.
OUTBOX_TIMEOUT = 0.3
# How long a record waits for PostgreSQL before it goes to the outbox instead (0.6 s: the
# holder's least wait, less the outbox's, less 0.1 s for the hops) ...
ACK_DEADLINE = round(DURABLE_DEADLINE - ACK_TIMEOUT - OUTBOX_TIMEOUT - 0.1, 3)
# ... and how long while the last write failed (PostgreSQL down): a short try, then the outbox.
DEGRADED_DEADLINE = 0.05
# Seconds after it is stored that a complete record must have its delivery confirmed by the edge,
# or it is re-marked failed, not charged (docs/billing.md); [billing] delivery_confirm_seconds.
DELIVERY_CONFIRM = 60.0


@dataclass(frozen=True)
class Settings:
    cfg: Config
    catalogue: Catalogue
    prices: dict[str, Prices]  # canonical model id -> micro-dollars per million tokens
    # (deployment name, canonical model id) -> the deployment's own price, where it has one.
    deployment_prices: dict[tuple[str, str], Prices] = field(default_factory=dict)
    ack_deadline: float = ACK_DEADLINE
    write_timeout: float = WRITE_TIMEOUT
    degraded_deadline: float = DEGRADED_DEADLINE
    outbox_timeout: float = OUTBOX_TIMEOUT
    max_batch: int = DEFAULT_MAX_BATCH
    delivery_confirm: float = DELIVERY_CONFIRM


def reload(settings: Settings, cfg: Config) -> None:
    """A config reload (``ezat_common.config_reload``): the prices of records that carry none
    (``Pricer`` reads the catalogue) and the price gauges. Nothing awaited: applied whole."""
    catalogue = Catalogue(cfg)
    settings.catalogue.replace(cfg)
    settings.prices.clear()
    settings.prices.update(catalogue.prices)
    settings.deployment_prices.clear()
    settings.deployment_prices.update(catalogue.deployment_prices)


def load(path: str | None = None) -> Settings:
    """Settings from the TOML at ``path`` or ``$EZAT_CONFIG``; ``ConfigError`` names the problem."""
    cfg = load_config(path)
    return from_config(cfg, ack_deadline=environment.positive_seconds(ENV_ACK_DEADLINE))


def from_config(cfg: Config, ack_deadline: float | None = None) -> Settings:
    catalogue = Catalogue(cfg)
    return Settings(
        cfg=cfg,
        catalogue=catalogue,
        prices=dict(catalogue.prices),
        deployment_prices=dict(catalogue.deployment_prices),
        ack_deadline=ack_deadline if ack_deadline is not None else ACK_DEADLINE,
        delivery_confirm=cfg.billing.delivery_confirm_seconds,
    )
