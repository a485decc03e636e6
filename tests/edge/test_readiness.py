"""The edge's own readiness (docs/reliability.md, "Readiness"): unready while it cannot check a
key (PostgreSQL unreachable and no key cached), whatever the other services do."""

from __future__ import annotations

from pathlib import Path

import pytest
from ezat_cli.infra import free_port
from support.config import SONNET, model
from support.probes import alone

pytestmark = pytest.mark.timeout(90)


def test_edge_without_a_database_or_a_cached_key_is_not_ready(tmp_path: Path) -> None:
    nowhere = f"postgresql://postgres@127.0.0.1:{free_port()}/postgres"  # nothing listens
    with alone(
        "ezat_edge", "edge", tmp_path, {"DATABASE_URL": nowhere}, models=[model(SONNET)]
    ) as edge:
        body = edge.until("/readyz", 503)
        assert body["checks"]["nats"] == "ok"
        assert body["checks"]["auth"] == "PostgreSQL unreachable and no key cached"
        assert edge.get("/healthz") == (200, {"status": "ok"})
        assert edge.ready_gauge() == 0.0
