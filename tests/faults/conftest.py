"""A stack of its own for the fault suite (`make test-faults`): processes here are killed, so it
never shares them with the e2e suite. Two replicas of the router and of the translator, one slow
simulator (streams last seconds, so faults land mid-stream), the session's NATS/PostgreSQL/Redis
under its own subject prefix and database, supervised as `ezat up` does."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from ezat_cli.infra import Infra
from ezat_cli.stack import Stack
from support.config import base_url, listen, one_simulator, write_config
from support.stack import free_ports, key, running

# The suite fails on any HTTP client collected unclosed (support/unclosed.py says why): its hooks
# and its autouse fixture, as this conftest's own.
from support.unclosed import (  # noqa: F401
    _no_unclosed_client,
    pytest_configure,
    pytest_sessionfinish,
    pytest_unconfigure,
)

from .load import Gateway


def faults_config(path: Path, ports: dict[str, int], delivery_confirm_seconds: float = 2.0) -> Path:
    """One slow simulator (streams last seconds, so faults land mid-stream) behind the Sonnet;
    ``ports``: edge, sim, router_metrics, translator_metrics."""
    sections = one_simulator(
        ports["edge"],
        ports["sim"],
        router={"first_byte_timeout": 10.0, "metrics_listen": listen(ports["router_metrics"])},
        # Short, so that the suite sees records settled (docs/billing.md); the default is 60 s.
        billing={"delivery_confirm_seconds": delivery_confirm_seconds},
        translator={"metrics_listen": listen(ports["translator_metrics"])},
        # The fetcher death scenario's image host runs on loopback.
        fetcher={"allow_networks": ["127.0.0.0/8"]},
        simulators=[
            {
                "name": "fault-sim",
                "listen": listen(ports["sim"]),
                "first_token_ms": 50,
                "token_ms": 100,
            }
        ],
    )
    return write_config(path, **sections)


PREFIX = "faults"


@pytest.fixture(scope="session")
def fault_stack(infra: Infra, database_url: str, data_dir: Path) -> Iterator[Gateway]:
    folder = data_dir / "fault-stack"
    names = ("edge", "sim", "router_metrics", "translator_metrics", "router2", "translator2")
    ports = free_ports(*names)
    config = faults_config(folder / "ezat-faults.toml", ports)
    # The second translator reads its metrics port from a config of its own.
    second = {**ports, "translator_metrics": ports["translator2"]}
    config2 = faults_config(folder / "ezat-faults-2.toml", second)

    def add_replicas(stack: Stack) -> None:
        listen2 = listen(ports["router2"])
        stack.add_service("router-2", "router", {"EZAT_ROUTER_METRICS_LISTEN": listen2})
        stack.add_service("translator-2", "translator", {"EZAT_CONFIG": str(config2.resolve())})
        stack.wait_ready(30)

    stack_infra = Infra(infra.nats_url, database_url, infra.redis_url)
    with running(config, stack_infra, PREFIX, then=add_replicas) as stack:
        metrics = {
            name: base_url(ports[port]) + "/metrics"
            for name, port in (
                ("router", "router_metrics"),
                ("router-2", "router2"),
                ("translator", "translator_metrics"),
                ("translator-2", "translator2"),
            )
        }
        yield Gateway(
            stack, base_url(ports["edge"]), key(database_url, "faults"), database_url, metrics
        )
