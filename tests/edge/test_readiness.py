"""The edge's own readiness (docs/reliability.md, "Readiness"): unready while it cannot check a
key (PostgreSQL unreachable and no key cached), whatever the other services do."""

from __future__ import annotations

from pathlib import Path

import pytest
from ezat_cli.infra import free_port
from support.config import SONNET, base_url, listen, model
from support.probes import Alone, alone

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


def test_edge_serves_metrics_and_probes_on_its_metrics_port(tmp_path: Path) -> None:
    # Issue 26: a scraper's network policy admits it to this port only, never the API port.
    nowhere = f"postgresql://postgres@127.0.0.1:{free_port()}/postgres"
    metrics_port = free_port()
    with alone(
        "ezat_edge",
        "edge",
        tmp_path,
        {"DATABASE_URL": nowhere},
        models=[model(SONNET)],
        edge={"metrics_listen": listen(metrics_port)},
    ) as edge:
        edge.until("/readyz", 503)  # the API port is up
        scraper = Alone(base_url(metrics_port), edge.nats, edge.proc, edge.log)
        body = scraper.until("/readyz", 503)  # the same verdict on the metrics port
        assert body["checks"]["auth"] == "PostgreSQL unreachable and no key cached"
        assert scraper.get("/healthz") == (200, {"status": "ok"})
        assert scraper.ready_gauge() == 0.0
