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
import asyncpg
import openai
import pytest
from ezat_cli import infra as infra_mod
from ezat_cli.infra import Embedded, free_port
from ezat_cli.stack import Stack
from ezat_common import db

from ..freeze import freeze

CONFIG = """
[edge]
listen = "127.0.0.1:{edge}"
ping_interval = 1.0
auth_cache_ttl = 1.0

[router]
region = "local"
max_attempts = 2
connect_timeout = 2.0
first_byte_timeout = 30.0
between_events_timeout = 10.0

[billing]
# Short, so that these scenarios see records settled (docs/billing.md); the default is 60 s.
delivery_confirm_seconds = 2.0

[shutdown]
drain_timeout = 30.0

[[models]]
id = "anthropic/claude-sonnet-5-5"
aliases = ["claude-sonnet-5-5"]
context_window = 200000
max_output_tokens = 64000
thinking = "adaptive"
effort_levels = ["low", "medium", "high"]
price = {{ input = 3.0, output = 15.0 }}

[[simulators]]
name = "fault-sim"
listen = "127.0.0.1:{sim}"

[[deployments]]
name = "sonnet-sim"
model = "anthropic/claude-sonnet-5-5"
base_url = "http://127.0.0.1:{sim}"
upstream_model = "claude-sonnet-5-5"
api_key = "sim-key"
"""

MODEL = "claude-sonnet-5-5"


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
        return anthropic.AsyncAnthropic(base_url=self.url, api_key=self.key, **kw)

    def openai(self, **kw: Any) -> openai.AsyncOpenAI:
        kw.setdefault("max_retries", 0)
        kw.setdefault("timeout", 30.0)
        return openai.AsyncOpenAI(base_url=self.url + "/openai/v1", api_key=self.key, **kw)

    async def ask(self, text: str = "hi [sim:tokens=3]", session: str | None = None) -> str:
        """One short request; the reply text (raises on any error)."""
        headers = {"x-ezat-session": session} if session else None
        msg = await self.anthropic(timeout=5.0).messages.create(
            model=MODEL,
            max_tokens=16,
            messages=[{"role": "user", "content": text}],
            extra_headers=headers,
        )
        return "".join(b.text for b in msg.content if b.type == "text")

    async def new_key(self, rpm: int | None = None) -> str:
        conn = await asyncpg.connect(self.infra.database_url, timeout=5)
        try:
            _, secret = await db.create_key(conn, "faults", rpm=rpm)
        finally:
            await conn.close()
        return secret


@pytest.fixture(scope="package")
def fault_stack(data_dir: Path) -> Iterator[FaultStack]:
    folder = data_dir / f"faults-{free_port()}"
    folder.mkdir()
    ports = {"edge": free_port(), "sim": free_port()}
    config = folder / "faults.toml"
    config.write_text(CONFIG.format(**ports))
    # Embedded servers of its own, whatever the session's environment says: these get killed.
    infra = infra_mod.ensure(folder, environ={})
    stack = Stack(
        config_path=config,
        data_dir=folder,
        infra=infra,
        extra_env={"EZAT_SUBJECT_PREFIX": f"faults{ports['edge']}"},
    )
    try:
        stack.start(timeout=90)
    except BaseException:
        stack.stop()
        raise
    stack.supervise_in_background()  # what `ezat up` runs
    fs = FaultStack(stack, f"http://127.0.0.1:{ports['edge']}", "")
    fs.key = asyncio.run(fs.new_key())
    try:
        yield fs
    finally:
        stack.stop()


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
