"""A stack of its own for the routing suite: five simulator deployments in region "eu" and one
in "us", TWO router processes (both "eu"), and a dedicated Redis that tests may stop and restart
(the session Redis stays untouched). NATS and PostgreSQL are the session's."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anthropic
import pytest
from ezat_cli.infra import Infra, free_port, start_redis, stop_process
from ezat_cli.stack import Stack
from ezat_common.config import DeploymentConfig
from ezat_router.core.selection import by_rendezvous
from support import sims
from support.config import SONNET, base_url, deployment, listen, model, write_config
from support.stack import free_ports, key, running

REGIONAL = "anthropic/regional-sim"
EU = [f"eu-{i}" for i in range(1, 6)]
BREAKER_OPEN_SECONDS = 2.0


def routing_config(path: Path, edge: int, metrics: int, sim_ports: dict[str, int]) -> Path:
    """Five eu deployments of the Sonnet on sim1..sim5 and one in "us" on sim6; the regional
    model on sim1, sim2 (eu) and sim6 (us)."""
    placed = [(EU[i - 1], SONNET, f"sim{i}", "eu") for i in range(1, 6)]
    placed += [("us-1", SONNET, "sim6", "us"), ("reg-eu-1", REGIONAL, "sim1", "eu")]
    placed += [("reg-eu-2", REGIONAL, "sim2", "eu"), ("reg-us-1", REGIONAL, "sim6", "us")]
    return write_config(
        path,
        edge={"listen": listen(edge)},
        router={
            "region": "eu",
            "max_attempts": 3,
            "connect_timeout": 2.0,
            "first_byte_timeout": 20.0,
            "between_events_timeout": 10.0,
            "breaker_failures": 5,
            "breaker_open_seconds": BREAKER_OPEN_SECONDS,
            "health_sync_seconds": 0.25,
            "metrics_listen": listen(metrics),
        },
        models=[
            model(SONNET, aliases=["claude-sonnet-5-5"]),
            model(
                REGIONAL,
                aliases=["regional-sim"],
                context_window=100_000,
                max_output_tokens=8192,
                price={"input": 1.0, "output": 2.0},
            ),
        ],
        simulators=[{"name": name, "listen": listen(port)} for name, port in sim_ports.items()],
        deployments=[
            deployment(
                name,
                model_id,
                base_url(sim_ports[sim]),
                upstream_model="claude-sonnet-5-5",
                region=region,
            )
            for name, model_id, sim, region in placed
        ],
    )


@dataclass
class Routing:
    stack: Stack
    url: str
    key: str
    sims: dict[str, str]  # deployment name -> simulator base URL (eu-1..eu-5, us-1)
    redis_url: str
    redis_port: int
    redis_dir: Path
    redis_proc: Any
    router_logs: list[Path]
    # Each router replica's /metrics.
    metrics_urls: list[str]
    _clients: dict[int, anthropic.AsyncAnthropic] = field(default_factory=dict)

    def anthropic(self) -> anthropic.AsyncAnthropic:
        """One client per event loop (each test has its own), reused: its connections stay open."""
        loop = id(asyncio.get_running_loop())
        if loop not in self._clients:
            self._clients[loop] = anthropic.AsyncAnthropic(
                base_url=self.url, api_key=self.key, max_retries=0
            )
        return self._clients[loop]

    async def faults(self, deployment: str, **fault: Any) -> None:
        await sims.set_faults(self.sims[deployment], **fault)

    async def calls(self, deployment: str) -> int:
        """Requests the deployment's simulator has received so far."""
        return await sims.request_count(self.sims[deployment])

    def stop_redis(self) -> None:
        stop_process(self.redis_proc)

    def start_redis(self) -> None:
        _, self.redis_proc = start_redis(self.redis_dir, self.redis_port)


def keys_homed_on(name: str, count: int, prefix: str) -> list[str]:
    """Fresh session keys whose rendezvous home among the five eu deployments is ``name``."""
    pool = [DeploymentConfig(name=n, model=SONNET, base_url="http://x", region="eu") for n in EU]
    found: list[str] = []
    i = 0
    while len(found) < count:
        key = f"{prefix}-{time.time_ns()}-{i}"
        if by_rendezvous(pool, key)[0].name == name:
            found.append(key)
        i += 1
    return found


def _wait_for_line(path: Path, text: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text(errors="replace"):
            return
        time.sleep(0.1)
    raise TimeoutError(f"`{text}` never appeared in {path}")


@pytest.fixture(scope="package")
def routing(infra: Infra, database_url: str, data_dir: Path) -> Iterator[Routing]:
    folder = data_dir / "routing"
    folder.mkdir()
    redis_dir = folder / "redis-data"
    redis_port = free_port()
    redis_url, redis_proc = start_redis(redis_dir, redis_port)
    sim_ports = free_ports(*(f"sim{i}" for i in range(1, 7)))
    edge = free_port()
    metrics_ports = [free_port(), free_port()]
    config = routing_config(folder / "routing.toml", edge, metrics_ports[0], sim_ports)
    second: list[Path] = []

    def add_second_router(stack: Stack) -> None:
        # A second replica, region from the environment (the same one here: affinity must agree).
        env = {"EZAT_ROUTER_REGION": "eu", "EZAT_ROUTER_METRICS_LISTEN": listen(metrics_ports[1])}
        second.append(stack.add_service("router-2", "router", env).log_path)
        _wait_for_line(second[0], "router ready", 30)

    sim_urls = {name: base_url(sim_ports[f"sim{i}"]) for i, name in enumerate(EU, 1)}
    sim_urls["us-1"] = base_url(sim_ports["sim6"])
    handle: Routing | None = None
    try:
        stack_infra = Infra(infra.nats_url, database_url, redis_url)
        with running(config, stack_infra, "routing", then=add_second_router) as stack:
            handle = Routing(
                stack=stack,
                url=base_url(edge),
                key=key(database_url, "routing"),
                sims=sim_urls,
                redis_url=redis_url,
                redis_port=redis_port,
                redis_dir=redis_dir,
                redis_proc=redis_proc,
                router_logs=[stack.children["router"].log_path, *second],
                metrics_urls=[f"{base_url(port)}/metrics" for port in metrics_ports],
            )
            yield handle
    finally:
        # A test may have restarted the dedicated Redis: stop the process running now.
        stop_process(handle.redis_proc if handle is not None else redis_proc)


@pytest.fixture
async def gw(routing: Routing) -> AsyncIterator[Routing]:
    """The stack, with every injected fault cleared after the test."""
    yield routing
    for name in routing.sims:
        await routing.faults(name)
    client = routing._clients.pop(id(asyncio.get_running_loop()), None)
    if client is not None:
        await client.close()
