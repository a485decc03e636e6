"""A rolling restart of every service in turn under load, and an edge that dies, under `ezat up`
(docs/reliability.md, "Graceful shutdown" and "The edge's socket"). Clients are the official SDKs
with their retries off, so every error the gateway lets through is counted."""

from __future__ import annotations

import asyncio
import signal
import socket
import time

import pytest

from ..load import Gateway, check, run_waves, summary, wait_billed
from .conftest import MODEL, FaultStack
from .test_graceful_shutdown import wait_exit

pytestmark = pytest.mark.timeout(240)

CONCURRENCY = 104
ORDER = ("router", "translator", "billing", "fetcher", "edge")
TOKENS, TOKEN_MS = 5, 40  # short requests, back to back
# A request in flight through every restart still takes well under this.
BOUND = 20.0


async def test_a_rolling_restart_of_every_service_under_load_has_no_client_error(
    fault_stack: FaultStack,
) -> None:
    fs = fault_stack
    assert await fs.ask()
    target = Gateway(fs.stack, fs.url, fs.key, fs.infra.database_url)
    windows: dict[str, float] = {}

    async def restarts() -> None:
        for name in ORDER:
            old = fs.stack.children[name].proc
            assert old is not None
            r = await asyncio.to_thread(fs.stack.restart, name, 60.0)
            windows[name] = r.window or 0.0
            try:
                await wait_exit(old, 40.0)  # the old one drained what it held and left
            except AssertionError:
                old.send_signal(signal.SIGUSR1)  # it prints where it waits (docs/reliability.md)
                await asyncio.sleep(1.0)
                log = fs.stack.children[name].log_path.read_text(errors="replace")
                at = log.rfind("ezat: stacks on SIGUSR1")
                dump = log[at:] if at >= 0 else log[-3000:]
                raise AssertionError(f"the old {name} did not exit:\n{dump[:6000]}") from None
            await asyncio.sleep(1.0)

    started = time.monotonic()
    # CONCURRENCY clients, each sending its next request as soon as its last one ended.
    histories = await run_waves(target, CONCURRENCY, TOKENS, restarts, 1.0, 0.0, TOKEN_MS)
    took = time.monotonic() - started
    print(f"rolling restart: {summary(histories)} in {took:.1f} s; {windows}")
    errors = [
        (h.kind, h.request_id, round(h.started - started, 2), h.outcome, h.status, h.error[:200])
        for h in histories
        if h.outcome != "complete"
    ]
    assert errors == []
    assert len(histories) > 5 * CONCURRENCY  # the load ran through every restart
    assert windows["edge"] == 0.0  # its replacement accepted before the old edge was told
    # Every answer the clients saw is charged exactly once, as complete.
    await wait_billed(target, histories, within=15.0)
    check(histories, BOUND)


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
