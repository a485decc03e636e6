"""A rolling restart of every service in turn under load, and an edge that dies, under `ezat up`
(docs/reliability.md, "Graceful shutdown" and "The edge's socket"). Clients are the official SDKs
with their retries off, so every error the gateway lets through is counted."""

from __future__ import annotations

import asyncio
import signal
import socket
import time
import uuid
from typing import Any

import asyncpg
import pytest

from .conftest import MODEL, FaultStack
from .test_graceful_shutdown import wait_exit

pytestmark = pytest.mark.timeout(240)

CONCURRENCY = 104
ORDER = ("router", "translator", "billing", "fetcher", "edge")


class Load:
    """``CONCURRENCY`` clients, each sending requests back to back (both APIs, streaming and
    not) until ``stop``: what each saw."""

    def __init__(self, fs: FaultStack) -> None:
        self.fs = fs
        self.ok = 0
        self.completed: list[str] = []  # request ids of the answers the clients saw whole
        self.errors: list[str] = []
        self.stop = asyncio.Event()
        self._anthropic = fs.anthropic(timeout=20.0)
        self._openai = fs.openai(timeout=20.0)

    async def _one(self, n: int, rid: str) -> None:
        prompt = [{"role": "user", "content": f"n{n} [sim:tokens=5 token_ms=40]"}]
        args: dict[str, Any] = {
            "model": MODEL,
            "max_tokens": 16,
            "messages": prompt,
            "extra_headers": {"x-request-id": rid},
        }
        kind = n % 4
        if kind == 0:
            msg = await self._anthropic.messages.create(**args)
            assert msg.stop_reason == "end_turn", msg
        elif kind == 1:
            async with self._anthropic.messages.stream(**args) as stream:
                final = await stream.get_final_message()
            assert final.stop_reason == "end_turn", final
        elif kind == 2:
            out = await self._openai.chat.completions.create(**args)
            assert out.choices[0].finish_reason == "stop", out
        else:
            chunks = await self._openai.chat.completions.create(**args, stream=True)
            reasons = [c.choices[0].finish_reason async for c in chunks if c.choices]
            assert "stop" in reasons, reasons

    async def _client(self, c: int) -> None:
        n = c
        while not self.stop.is_set():
            rid = f"roll-{uuid.uuid4().hex[:16]}"
            try:
                await self._one(n, rid)
                self.ok += 1
                self.completed.append(rid)
            except Exception as exc:  # every error is what a client saw
                self.errors.append(f"{type(exc).__name__}: {str(exc)[:200]}")
            n += CONCURRENCY

    async def run(self, during: Any) -> None:
        clients = [asyncio.create_task(self._client(c)) for c in range(CONCURRENCY)]
        try:
            await during()
        finally:
            self.stop.set()
            await asyncio.gather(*clients)


async def test_a_rolling_restart_of_every_service_under_load_has_no_client_error(
    fault_stack: FaultStack,
) -> None:
    fs = fault_stack
    assert await fs.ask()
    load = Load(fs)
    windows: dict[str, float] = {}

    async def restarts() -> None:
        await asyncio.sleep(1.0)
        for name in ORDER:
            old = fs.stack.children[name].proc
            assert old is not None
            r = await asyncio.to_thread(fs.stack.restart, name, 60.0)
            windows[name] = r.window or 0.0
            try:
                await wait_exit(old, 40.0)  # the old one drained what it held and left
            except AssertionError:
                log = fs.stack.children[name].log_path.read_text(errors="replace")
                raise AssertionError(f"the old {name} did not exit:\n{log[-3000:]}") from None
            await asyncio.sleep(1.0)

    started = time.monotonic()
    await load.run(restarts)
    took = time.monotonic() - started
    print(f"rolling restart: {load.ok} ok, {len(load.errors)} errors in {took:.1f} s; {windows}")
    assert load.errors == []
    assert load.ok > 5 * CONCURRENCY  # the load ran through every restart
    assert windows["edge"] == 0.0  # its replacement accepted before the old edge was told
    # Every answer the clients saw is charged exactly once, as complete.
    rows = await rows_of(fs, load.completed)
    wrong = {rid: rows.get(rid) for rid in load.completed if rows.get(rid) != ["complete"]}
    assert wrong == {}


async def rows_of(fs: FaultStack, ids: list[str], within: float = 15.0) -> dict[str, list[str]]:
    """The usage rows' statuses by request id, once every request has one (or ``within``)."""
    deadline = time.monotonic() + within
    conn = await asyncpg.connect(fs.infra.database_url)
    try:
        while True:
            found = await conn.fetch(
                "SELECT request_id, status FROM usage_records WHERE request_id = ANY($1::text[])",
                ids,
            )
            if len({r["request_id"] for r in found}) >= len(ids) or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.5)
    finally:
        await conn.close()
    rows: dict[str, list[str]] = {}
    for r in found:
        rows.setdefault(r["request_id"], []).append(r["status"])
    return rows


async def test_connections_made_while_the_edge_is_down_wait_for_its_replacement(
    fault_stack: FaultStack,
) -> None:
    """The stack holds the edge's listening socket: after a SIGKILL, a new connection is not
    refused; it waits in the accept queue and is served by the restarted edge."""
    fs = fault_stack
    assert await fs.ask()
    edge = fs.stack.children["edge"]
    assert edge.proc is not None
    edge.proc.send_signal(signal.SIGKILL)
    await asyncio.to_thread(edge.proc.wait)
    host, port = fs.url.removeprefix("http://").rsplit(":", 1)
    # Connecting succeeds although no edge runs: the kernel queues it on the stack's socket.
    with socket.create_connection((host, int(port)), timeout=2.0):
        pass
    start = time.monotonic()
    text = await fs.anthropic(timeout=30.0).messages.create(
        model=MODEL, max_tokens=16, messages=[{"role": "user", "content": "back [sim:tokens=3]"}]
    )
    waited = time.monotonic() - start
    print(f"request made while the edge was down answered after {waited:.2f} s")
    assert text.stop_reason == "end_turn"
