"""A stack of its own for fault tests that kill things: its own embedded NATS, PostgreSQL and
Redis (started by ``infra.ensure`` as ``ezat up`` does, whatever ``*_URL`` the session has), its
own data directory and subject prefix, and the supervisor running as under ``ezat up``. The
shared e2e stack never notices what these tests break."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from ezat_cli import infra as infra_mod
from ezat_cli.infra import Embedded, free_port
from ezat_cli.stack import Stack
from support.clients import track
from support.config import SONNET, base_url, listen, model, one_simulator, write_config
from support.stack import create_key, running

from ..freeze import freeze

MODEL = "claude-sonnet-5-5"


def supervision_config(path: Path, edge: int, sim: int) -> Path:
    sections = one_simulator(
        edge,
        sim,
        edge={"auth_cache_ttl": 1.0},
        router={"first_byte_timeout": 30.0},
        # Short, so that these scenarios see records settled (docs/billing.md); the default is
        # 60 s.
        billing={"delivery_confirm_seconds": 2.0},
        shutdown={"drain_timeout": 30.0},
        models=[
            model(
                SONNET,
                aliases=[MODEL],
                thinking="adaptive",
                effort_levels=["low", "medium", "high"],
            )
        ],
        simulators=[{"name": "fault-sim", "listen": listen(sim)}],
    )
    return write_config(path, **sections)


@dataclass
class FaultStack:
    stack: Stack
    url: str
    key: str

    @property
    def infra(self) -> infra_mod.Infra:
        assert self.stack.infra is not None
        return self.stack.infra

    def anthropic(self, **kw: Any) -> anthropic.AsyncAnthropic:
        kw.setdefault("max_retries", 0)
        kw.setdefault("timeout", 30.0)
        client = anthropic.AsyncAnthropic(base_url=self.url, api_key=self.key, **kw)
        return track(client)

    def openai(self, **kw: Any) -> openai.AsyncOpenAI:
        kw.setdefault("max_retries", 0)
        kw.setdefault("timeout", 30.0)
        client = openai.AsyncOpenAI(base_url=self.url + "/openai/v1", api_key=self.key, **kw)
        return track(client)

    async def ask(self, text: str = "hi [sim:tokens=3]", session: str | None = None) -> str:
        """One short request; the reply text (raises on any error)."""
        headers = {"x-ezat-session": session} if session else None
        async with self.anthropic(timeout=5.0) as client:
            msg = await client.messages.create(
                model=MODEL,
                max_tokens=16,
                messages=[{"role": "user", "content": text}],
                extra_headers=headers,
            )
        return "".join(b.text for b in msg.content if b.type == "text")

    async def new_key(self, rpm: int | None = None) -> str:
        return await create_key(self.infra.database_url, "faults", timeout=5, rpm=rpm)


@pytest.fixture(scope="package")
def fault_stack(data_dir: Path) -> Iterator[FaultStack]:
    folder = data_dir / f"faults-{free_port()}"
    edge = free_port()
    config = supervision_config(folder / "faults.toml", edge, free_port())
    # Embedded servers of its own, whatever the session's environment says: these get killed.
    infra = infra_mod.ensure(folder, environ={})
    with running(config, infra, f"faults{edge}") as stack:
        fs = FaultStack(stack, base_url(edge), "")
        fs.key = asyncio.run(fs.new_key())
        yield fs


async def outage(server: Embedded, seconds: float, restart_within: float = 30.0) -> float:
    """Stop ``server`` cleanly and keep the supervisor from restarting it for ``seconds``, then hand
    it back to the supervisor; returns the seconds it was down (stopped until it was back)."""
    server.supervised = False
    try:
        start = time.monotonic()
        await asyncio.to_thread(server.stop)
        assert not server.alive, f"{server.name} still running after stop"
        await asyncio.sleep(seconds)
    finally:
        server.supervised = True
    while not server.alive:
        assert time.monotonic() - start < seconds + restart_within, f"{server.name} not back"
        await asyncio.sleep(0.05)
    return time.monotonic() - start


async def frozen(server: Embedded, seconds: float) -> float:
    """``server`` frozen for ``seconds`` (``freeze``): there, alive to the supervisor, answering
    nothing, so that every call to it waits for its timeout. Returns the seconds it was frozen."""
    pid = server.pid
    assert pid is not None and server.alive
    return await freeze(pid, seconds)


async def until_ok(
    attempt: Callable[[], Awaitable[Any]], timeout: float, every: float = 0.1
) -> tuple[Any, float]:
    """Call ``attempt`` until it returns without raising; (its result, seconds it took)."""
    start = time.monotonic()
    while True:
        try:
            return await attempt(), time.monotonic() - start
        except Exception:
            if time.monotonic() - start > timeout:
                raise
            await asyncio.sleep(every)
