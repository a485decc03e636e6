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

import aiohttp
import anthropic
import asyncpg
import pytest
from ezat_cli.infra import Infra, free_port, start_redis, stop_process
from ezat_cli.stack import Stack
from ezat_common import db
from ezat_common.config import DeploymentConfig
from ezat_router.core.selection import by_rendezvous

SONNET = "anthropic/claude-sonnet-5-5"
REGIONAL = "anthropic/regional-sim"
EU = [f"eu-{i}" for i in range(1, 6)]
BREAKER_OPEN_SECONDS = 2.0

CONFIG = """
[edge]
listen = "127.0.0.1:{edge}"

[router]
region = "eu"
max_attempts = 3
connect_timeout = 2.0
first_byte_timeout = 20.0
between_events_timeout = 10.0
breaker_failures = 5
breaker_open_seconds = {open_seconds}
health_sync_seconds = 0.25
metrics_listen = "127.0.0.1:{metrics}"

[[models]]
id = "{sonnet}"
aliases = ["claude-sonnet-5-5"]
context_window = 200000
max_output_tokens = 64000
price = {{ input = 3.0, output = 15.0 }}

[[models]]
id = "{regional}"
aliases = ["regional-sim"]
context_window = 100000
max_output_tokens = 8192
price = {{ input = 1.0, output = 2.0 }}
{sims}{deployments}"""


def _deployment(name: str, model: str, port: int, region: str) -> str:
    return (
        f'\n[[deployments]]\nname = "{name}"\nmodel = "{model}"\n'
        f'base_url = "http://127.0.0.1:{port}"\nupstream_model = "claude-sonnet-5-5"\n'
        f'api_key = "sim-key"\nregion = "{region}"\n'
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
        sim = self.sims[deployment]
        async with aiohttp.ClientSession() as s:
            if fault:
                async with s.post(f"{sim}/_sim/faults", json=fault) as r:
                    assert r.status < 300
            else:
                async with s.delete(f"{sim}/_sim/faults") as r:
                    assert r.status < 300

    async def calls(self, deployment: str) -> int:
        """Requests the deployment's simulator has received so far."""
        url = f"{self.sims[deployment]}/_sim/stats"
        async with aiohttp.ClientSession() as s, s.get(url) as r:
            return int((await r.json())["requests"])

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


async def _new_key(database_url: str) -> str:
    conn = await asyncpg.connect(database_url)
    try:
        _, secret = await db.create_key(conn, "routing")
    finally:
        await conn.close()
    return str(secret)


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
    ports = {f"sim{i}": free_port() for i in range(1, 7)}
    edge, metrics = free_port(), free_port()
    sims = "".join(
        f'\n[[simulators]]\nname = "sim{i}"\nlisten = "127.0.0.1:{ports[f"sim{i}"]}"\n'
        for i in range(1, 7)
    )
    deployments = "".join(
        _deployment(EU[i - 1], SONNET, ports[f"sim{i}"], "eu") for i in range(1, 6)
    )
    deployments += _deployment("us-1", SONNET, ports["sim6"], "us")
    deployments += _deployment("reg-eu-1", REGIONAL, ports["sim1"], "eu")
    deployments += _deployment("reg-eu-2", REGIONAL, ports["sim2"], "eu")
    deployments += _deployment("reg-us-1", REGIONAL, ports["sim6"], "us")
    config = folder / "routing.toml"
    config.write_text(
        CONFIG.format(
            edge=edge,
            metrics=metrics,
            open_seconds=BREAKER_OPEN_SECONDS,
            sonnet=SONNET,
            regional=REGIONAL,
            sims=sims,
            deployments=deployments,
        )
    )
    stack = Stack(
        config_path=config,
        data_dir=folder,
        infra=Infra(infra.nats_url, database_url, redis_url),
        # Its own subjects: other suites' stacks share this NATS server.
        extra_env={"EZAT_SUBJECT_PREFIX": "routing"},
    )
    try:
        stack.start(timeout=90)
        # A second replica, region from the environment (the same one here: affinity must agree).
        env = {"EZAT_ROUTER_REGION": "eu", "EZAT_ROUTER_METRICS_LISTEN": f"127.0.0.1:{free_port()}"}
        second = stack.add_service("router-2", "router", env)
        _wait_for_line(second.log_path, "router ready", 30)
    except BaseException:
        stack.stop()
        stop_process(redis_proc)
        raise
    stack.supervise_in_background()
    sim_urls = {name: f"http://127.0.0.1:{ports[f'sim{i}']}" for i, name in enumerate(EU, 1)}
    sim_urls["us-1"] = f"http://127.0.0.1:{ports['sim6']}"
    key = asyncio.run(_new_key(database_url))
    handle = Routing(
        stack=stack,
        url=f"http://127.0.0.1:{edge}",
        key=key,
        sims=sim_urls,
        redis_url=redis_url,
        redis_port=redis_port,
        redis_dir=redis_dir,
        redis_proc=redis_proc,
        router_logs=[stack.children["router"].log_path, second.log_path],
    )
    try:
        yield handle
    finally:
        stack.stop()
        stop_process(handle.redis_proc)


@pytest.fixture
async def gw(routing: Routing) -> AsyncIterator[Routing]:
    """The stack, with every injected fault cleared after the test."""
    yield routing
    for name in routing.sims:
        await routing.faults(name)
    client = routing._clients.pop(id(asyncio.get_running_loop()), None)
    if client is not None:
        await client.close()
