"""The running stack for end-to-end tests: five service processes, two simulators, real
NATS/PostgreSQL/Redis, started once per session. Clients are the official SDKs."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import anthropic
import asyncpg
import nats
import nats.js.errors
import openai
import pytest
from ezat_cli.infra import Infra
from ezat_cli.stack import Stack
from ezat_common import envelopes
from support import sims
from support.clients import track
from support.config import SONNET, base_url, deployment, listen, model, write_config
from support.stack import create_key, free_ports, key, running

STORED_RESPONSE_MAX_BYTES = 4 * 1024 * 1024
STORED_CHAIN_MAX_TURNS = 8
STORED_CHAIN_MAX_BYTES = 6 * 1024 * 1024
PORTS = ("edge", "sim_a", "sim_b", "router_metrics", "dead")  # the ports of the config


def e2e_config(path: Path, ports: dict[str, int]) -> Path:
    """The config of this stack (and of test_ezat_up.py's `ezat up`), on ``ports``."""
    sim_a, sim_b, dead = base_url(ports["sim_a"]), base_url(ports["sim_b"]), base_url(ports["dead"])
    return write_config(
        path,
        edge={"listen": listen(ports["edge"]), "ping_interval": 1.0},
        router={
            "region": "local",
            "max_attempts": 3,
            "connect_timeout": 2.0,
            # Short, so each upstream-misbehaviour test (test_upstream_misbehaviour.py) ends
            # within ~10 s; still far above what any answer of the simulator takes here (the
            # longest pause is 2.6 s).
            "first_byte_timeout": 8.0,
            "stream_first_byte_timeout": 3.0,
            "between_events_timeout": 6.0,
            "metrics_listen": listen(ports["router_metrics"]),
        },
        # Small enough that test_responses_store_bounds.py passes each with real input.
        translator={
            "stored_response_max_bytes": STORED_RESPONSE_MAX_BYTES,
            "stored_chain_max_turns": STORED_CHAIN_MAX_TURNS,
            "stored_chain_max_bytes": STORED_CHAIN_MAX_BYTES,
        },
        # The test image server runs on loopback; production never lists private networks here.
        fetcher={"allow_networks": ["127.0.0.0/8"]},
        models=[
            model(
                SONNET,
                aliases=["claude-sonnet-5-5", "claude-sonnet-5.5"],
                sampling=False,
                prompt_caching=True,
                thinking="adaptive",
                effort_levels=["low", "medium", "high", "xhigh", "max"],
            ),
            model(
                "anthropic/claude-instant-sim",
                aliases=["claude-instant"],
                context_window=100_000,
                max_output_tokens=8192,
                sampling=True,
                prompt_caching=False,
                price={"input": 0.8, "output": 4.0},
            ),
            model(
                "anthropic/claude-failover-sim",
                aliases=["claude-failover"],
                context_window=100_000,
                max_output_tokens=8192,
                price={"input": 1.0, "output": 2.0},
            ),
        ],
        simulators=[
            {"name": "sim-a", "listen": listen(ports["sim_a"])},
            {"name": "sim-b", "listen": listen(ports["sim_b"])},
        ],
        deployments=[
            deployment("sonnet-a", SONNET, sim_a, upstream_model="claude-sonnet-5-5"),
            deployment("sonnet-b", SONNET, sim_b, upstream_model="claude-sonnet-5-5"),
            deployment("instant-b", "anthropic/claude-instant-sim", sim_b),
            deployment("failover-dead", "anthropic/claude-failover-sim", dead),
            deployment("failover-live", "anthropic/claude-failover-sim", sim_a),
        ],
    )


PREFIX = "e2e"  # this stack's NATS subjects and streams; other suites share the NATS server
# A sealing key id the translators treat as retired (test_responses_sealing.py).
RETIRED_SEAL_KEY = "retired-e2e"


class Gateway:
    """Addresses and a key of the running stack, plus helpers the tests share."""

    def __init__(self, stack: Stack, ports: dict[str, int], key: str, database_url: str) -> None:
        self.stack = stack
        self.url = base_url(ports["edge"])
        self.sim_a = base_url(ports["sim_a"])
        self.sim_b = base_url(ports["sim_b"])
        self.router_metrics = base_url(ports["router_metrics"]) + "/metrics"
        self.key = key
        self.database_url = database_url

    def anthropic(self, **kw: Any) -> anthropic.AsyncAnthropic:
        """A client closed when the test ends (support/clients.py)."""
        kw.setdefault("max_retries", 0)
        kw.setdefault("api_key", self.key)
        return track(anthropic.AsyncAnthropic(base_url=self.url, **kw))

    def openai(self, **kw: Any) -> openai.AsyncOpenAI:
        """A client closed when the test ends (support/clients.py)."""
        kw.setdefault("max_retries", 0)
        kw.setdefault("api_key", self.key)
        return track(openai.AsyncOpenAI(base_url=self.url + "/openai/v1", **kw))

    async def sent_upstream(self, request_id: str) -> dict[str, Any]:
        """What the deployment received for this request id (its request-log entry)."""
        for sim in (self.sim_a, self.sim_b):
            for entry in await self.sim_requests(sim, 100):
                if entry["headers"].get("x-request-id") == request_id:
                    return entry
        raise AssertionError(f"no deployment received {request_id}")

    async def sent_for(self, response: Any) -> dict[str, Any]:
        """What the deployment received for an SDK response object: found by the request id the
        SDK read from the answer's header (a response's own id is made of the request's uid)."""
        request_id = response._request_id
        assert request_id, "no x-request-id header on the answer"
        return await self.sent_upstream(request_id)

    async def usage_row(self, request_id: str, wait: float = 5.0) -> asyncpg.Record | None:
        """The request's usage row, waiting up to ``wait`` s for it.

        The final event is released once the record is durable in the JetStream outbox; billing
        drains it into PostgreSQL milliseconds later (docs/billing.md), hence the short wait.
        For "no row" assertions the full wait elapses, so a late row is still caught.
        """
        deadline = time.monotonic() + wait
        conn = await asyncpg.connect(self.database_url)
        try:
            while True:
                row = await conn.fetchrow(
                    "SELECT * FROM usage_records WHERE request_id = $1", request_id
                )
                if row is not None or time.monotonic() >= deadline:
                    return row
                await asyncio.sleep(0.02)
        finally:
            await conn.close()

    async def record_is_durable(self, request_id: str) -> bool:
        """Right now, without waiting: is the usage record in PostgreSQL or in the JetStream
        outbox? (Billing moves it from the second to the first; it is always in one of them.)"""
        if await self.usage_row(request_id, wait=0) is not None:
            return True
        nc = await nats.connect(self.stack.infra.nats_url)  # type: ignore[union-attr]
        try:
            js = nc.jetstream()
            info = await js.stream_info(f"{PREFIX}_billing_outbox")
            for seq in range(info.state.first_seq, info.state.last_seq + 1):
                try:
                    msg = await js.get_msg(f"{PREFIX}_billing_outbox", seq)
                except nats.js.errors.NotFoundError:
                    continue
                item = envelopes.decode_outbox(msg.data or b"")
                # The edge's delivery confirmations share the stream (docs/billing.md).
                if isinstance(item, envelopes.UsageRecord) and item.request_id == request_id:
                    return True
        finally:
            await nc.close()
        return await self.usage_row(request_id, wait=0) is not None

    async def sim_requests(self, sim: str, limit: int = 50) -> list[dict[str, Any]]:
        return await sims.requests(sim, limit)

    async def sim_faults(self, sim: str, **fault: Any) -> None:
        await sims.set_faults(sim, **fault)


@pytest.fixture(scope="session")
def gateway(infra: Infra, database_url: str, data_dir: Path) -> Iterator[Gateway]:
    used = free_ports(*PORTS)
    config = e2e_config(data_dir / "stack" / "ezat-test.toml", used)
    stack_infra = Infra(infra.nats_url, database_url, infra.redis_url)
    env = {"EZAT_SEAL_KEYS_RETIRED": RETIRED_SEAL_KEY}
    with running(config, stack_infra, PREFIX, env=env) as stack:
        yield Gateway(stack, used, key(database_url, "e2e"), database_url)


@pytest.fixture
async def clean_sims(gateway: Gateway) -> AsyncIterator[None]:
    """Faults injected by a test never outlive it."""
    yield
    await gateway.sim_faults(gateway.sim_a)
    await gateway.sim_faults(gateway.sim_b)


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture(scope="session")
def new_key(database_url: str):  # type: ignore[no-untyped-def]
    async def make(name: str = "extra", **kw: Any) -> str:
        return await create_key(database_url, name, **kw)

    return make
