"""The router's own readiness (docs/reliability.md, "Readiness"): Redis down is reported and
never makes it unready (routing goes on from hashing); NATS gone does; alive all along."""

from __future__ import annotations

from pathlib import Path

import pytest
from ezat_cli.infra import free_port
from support.config import SONNET, deployment, model
from support.probes import alone

pytestmark = pytest.mark.timeout(90)


def test_router_stays_ready_without_redis_and_goes_unready_without_nats(tmp_path: Path) -> None:
    nowhere = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens
    sections = {
        "router": {"region": "local"},
        "models": [model(SONNET)],
        "deployments": [deployment("sonnet-x", SONNET, f"http://127.0.0.1:{free_port()}")],
    }
    env = {"REDIS_URL": nowhere, "EZAT_ROUTER_METRICS_LISTEN": ""}
    with alone("ezat_router", "router", tmp_path, env, **sections) as router:
        body = router.until("/readyz", 200)
        assert body["checks"]["redis"] == "unreachable: routing from hashing alone"
        assert body["checks"]["nats"] == "ok"
        assert router.ready_gauge() == 1.0

        router.stop_nats()
        body = router.until("/readyz", 503)
        assert body["checks"]["nats"] == "not connected"
        assert router.get("/healthz") == (200, {"status": "ok"})
        assert router.ready_gauge() == 0.0
