"""A stack of its own for the fault suite (`make test-faults`): processes here are killed, so it
never shares them with the e2e suite. Two replicas of the router and of the translator, one slow
simulator (streams last seconds, so faults land mid-stream), the session's NATS/PostgreSQL/Redis
under its own subject prefix and database, supervised as `ezat up` does."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest
from ezat_cli.infra import Infra, free_port
from ezat_cli.stack import Stack
from ezat_common import db

from .load import Target

CONFIG = """
[edge]
listen = "127.0.0.1:{edge}"
ping_interval = 1.0

[router]
region = "local"
max_attempts = 2
connect_timeout = 2.0
first_byte_timeout = 10.0
between_events_timeout = 10.0
metrics_listen = "127.0.0.1:{router_metrics}"

[billing]
# Short, so that the suite sees records settled (docs/billing.md); the default is 60 s.
delivery_confirm_seconds = 2.0

[translator]
metrics_listen = "127.0.0.1:{translator_metrics}"

[fetcher]
# The fetcher death scenario's image host runs on loopback.
allow_networks = ["127.0.0.0/8"]

[[models]]
id = "anthropic/claude-sonnet-5-5"
aliases = ["claude-sonnet-5-5"]
context_window = 200000
max_output_tokens = 64000
price = {{ input = 3.0, output = 15.0 }}

[[simulators]]
name = "fault-sim"
listen = "127.0.0.1:{sim}"
first_token_ms = 50
token_ms = 100

[[deployments]]
name = "sonnet-sim"
model = "anthropic/claude-sonnet-5-5"
base_url = "http://127.0.0.1:{sim}"
upstream_model = "claude-sonnet-5-5"
api_key = "sim-key"
"""

PREFIX = "faults"


@pytest.fixture(scope="session")
def fault_stack(infra: Infra, database_url: str, data_dir: Path) -> Iterator[Target]:
    folder = data_dir / "fault-stack"
    folder.mkdir()
    names = ("edge", "sim", "router_metrics", "translator_metrics", "router2", "translator2")
    ports = {name: free_port() for name in names}
    config = folder / "ezat-faults.toml"
    config.write_text(CONFIG.format(**ports))
    # The second translator reads its metrics port from a config of its own.
    config2 = folder / "ezat-faults-2.toml"
    config2.write_text(CONFIG.format(**{**ports, "translator_metrics": ports["translator2"]}))
    stack = Stack(
        config_path=config,
        data_dir=folder,
        infra=Infra(infra.nats_url, database_url, infra.redis_url),
        extra_env={"EZAT_SUBJECT_PREFIX": PREFIX},
    )
    try:
        stack.start(timeout=90)
        listen2 = f"127.0.0.1:{ports['router2']}"
        stack.add_service("router-2", "router", {"EZAT_ROUTER_METRICS_LISTEN": listen2})
        stack.add_service("translator-2", "translator", {"EZAT_CONFIG": str(config2.resolve())})
        stack.wait_ready(30)
    except BaseException:
        stack.stop()
        raise
    stack.supervise_in_background()
    key = asyncio.run(_new_key(database_url))
    try:
        metrics = {
            name: f"http://127.0.0.1:{ports[port]}/metrics"
            for name, port in (
                ("router", "router_metrics"),
                ("router-2", "router2"),
                ("translator", "translator_metrics"),
                ("translator-2", "translator2"),
            )
        }
        yield Target(stack, f"http://127.0.0.1:{ports['edge']}", key, database_url, metrics)
    finally:
        stack.stop()


async def _new_key(database_url: str) -> str:
    conn = await asyncpg.connect(database_url)
    try:
        _, secret = await db.create_key(conn, "faults")
    finally:
        await conn.close()
    return secret
