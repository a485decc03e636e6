"""The router's part of a config reload (``Router.reload``): the next requests see the new
deployments and prices; a deployment that stays keeps its endpoint and its health (breaker,
cooldown); a removed one is no longer routed to, a new one starts healthy."""

from __future__ import annotations

from pathlib import Path
from unittest.mock import MagicMock

import msgspec
from ezat_common.config import Config, load_config
from ezat_common.envelopes import UsageRecord
from ezat_common.redis_keys import RedisKeys
from ezat_router.core.health import DeploymentHealth
from ezat_router.routing import Router
from ezat_router.shared_state import SharedState
from prometheus_client import REGISTRY

SHIPPED = Path(__file__).resolve().parents[2] / "config" / "ezat.toml"
NOW = 1000.0
SONNET = "anthropic/claude-sonnet-5-5"


def router_of(cfg: Config) -> tuple[Router, SharedState]:
    names = [d.name for d in cfg.deployments]
    shared = SharedState(cfg.router, "local", names, None, RedisKeys(prefix="t"), lambda: NOW)
    router = Router(cfg, MagicMock(), MagicMock(), MagicMock(), MagicMock(), shared, "local")
    return router, shared


def edited(cfg: Config) -> Config:
    """``cfg`` with local-sonnet-b removed, local-new added, the instant model's price x10 and
    ``max_attempts`` 5."""
    deployments = [d for d in cfg.deployments if d.name != "local-sonnet-b"]
    deployments.append(msgspec.structs.replace(deployments[0], name="local-new"))
    models = list(cfg.models)
    instant = models[2]
    models[2] = msgspec.structs.replace(
        instant, price=msgspec.structs.replace(instant.price, input=8.0, output=40.0)
    )
    router = msgspec.structs.replace(cfg.router, max_attempts=5)
    return msgspec.structs.replace(cfg, deployments=deployments, models=models, router=router)


def test_a_reload_swaps_deployments_and_prices_and_keeps_the_health_of_those_that_stay() -> None:
    cfg = load_config(str(SHIPPED))
    router, shared = router_of(cfg)
    tripped = DeploymentHealth(open_until=NOW + 30, failures=5, changed_at=NOW)
    shared.board.put("local-sonnet-a", tripped)
    kept = router._endpoints["local-sonnet-a"]
    record = UsageRecord(
        request_id="r", key_id="k", model="anthropic/claude-instant-sim", api="messages",
        stream=False, status="complete", deployment="local-instant-b", input_tokens=1_000_000,
    )  # fmt: skip
    assert router._forwarder._pricer.prices(record).input == 800_000  # type: ignore[union-attr]

    router.reload(edited(cfg))

    assert router._endpoints["local-sonnet-a"] is kept  # unchanged: the same endpoint
    assert shared.health("local-sonnet-a") == tripped  # its breaker stays open
    assert shared.availability("local-sonnet-a", NOW) == "open"
    assert "local-sonnet-b" not in router._endpoints
    sonnet = [d.name for d in router._deployments[SONNET]]
    assert sonnet == ["local-sonnet-a", "local-new"]
    assert shared.availability("local-new", NOW) == "up"
    assert set(shared.availabilities()) == {d.name for d in edited(cfg).deployments}
    assert router._max_attempts == 5
    up = "ezat_router_deployment_up"
    assert REGISTRY.get_sample_value(up, {"deployment": "local-new", "model": SONNET}) == 1.0
    assert REGISTRY.get_sample_value(up, {"deployment": "local-sonnet-b", "model": SONNET}) is None
    assert router._forwarder._pricer.prices(record).input == 8_000_000  # type: ignore[union-attr]
