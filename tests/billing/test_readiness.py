"""Billing's own readiness (docs/reliability.md, "Readiness"): ready while a record can be made
durable somewhere (PostgreSQL, or the JetStream outbox while PostgreSQL is down), unready once
NATS is gone; alive all along."""

from __future__ import annotations

from pathlib import Path

import pytest
from ezat_cli.infra import free_port
from support.probes import alone

pytestmark = pytest.mark.timeout(90)


def test_billing_is_ready_on_the_outbox_without_postgresql_and_unready_without_nats(
    tmp_path: Path,
) -> None:
    nowhere = f"postgresql://postgres@127.0.0.1:{free_port()}/postgres"  # nothing listens
    with alone("ezat_billing", "billing", tmp_path, {"DATABASE_URL": nowhere}) as billing:
        body = billing.until("/readyz", 200)
        assert body["checks"]["postgresql"] != "ok"
        assert body["checks"]["outbox"] == "ok"
        assert body["checks"]["store"] == "ok"
        assert billing.ready_gauge() == 1.0

        billing.stop_nats()
        body = billing.until("/readyz", 503)
        assert body["status"] == "not ready"
        assert body["checks"]["nats"] == "not connected"
        assert body["checks"]["store"] == "neither PostgreSQL nor the outbox is usable"
        assert billing.get("/healthz") == (200, {"status": "ok"})  # liveness: the loop answers
        assert billing.ready_gauge() == 0.0
