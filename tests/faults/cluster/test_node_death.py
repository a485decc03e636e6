"""One node of a 3-node NATS cluster SIGKILLed mid-load (docs/reliability.md, "A 3-node NATS
cluster"): no request hangs, each ends within its bound, every complete answer is whole and
charged exactly once (0 lost records, none doubled), a stream that lost a message ends with an
error and is not charged, the stack serves on two nodes, and the node rejoins.

The node killed is the worst one: the node the edge is connected to (every reply to every client
passes through it) after the usage outbox stream's leader was moved onto it (every record's and
every delivery confirmation's PubAck comes from it), so both the core-NATS path and JetStream
lose their server at once.
"""

from __future__ import annotations

import asyncio
import time

import nats
import pytest

from ..load import History, check, run_load, serves_again, summary
from .conftest import (
    DELIVERY_CONFIRM,
    REPLICAS,
    ClusterStack,
    current_peers,
    final_rows,
    step_down,
)

pytestmark = pytest.mark.timeout(150)

N = 100
TOKENS = 40
TOKEN_MS = 100  # 4 s requests: the kill lands mid-way
CHARS = TOKENS * 4  # the simulator's tokens are 4 characters each (simulator/README.md)
FAULT_AT = 1.0
# A stream whose replies were lost is ended by the edge's watchdog 3 s after its last event; a
# request with nothing sent yet is published again after 3 s of silence and runs again (4 s);
# the record of a request ending while the outbox has no leader goes to billing directly within
# the 2 s durable deadline; the rest is room for 100 requests on two cores.
BOUND = FAULT_AT + 3.0 + 4.0 + 2.0 + 6.0
# A request that ends in an error does so this soon after the kill.
ERROR_BOUND = 5.0


async def test_sigkill_of_a_nats_node_mid_load_loses_nothing(cluster_stack: ClusterStack) -> None:
    cs = cluster_stack
    stream = cs.subjects.outbox_stream
    [victim] = cs.cluster.connected("edge-")
    nc = await nats.connect(servers=[n.url for n in cs.cluster.nodes if n.name != victim])
    try:
        assert await step_down(nc, stream, victim) == victim
        killed_at = 0.0

        async def fault() -> None:
            nonlocal killed_at
            cs.cluster.kill(victim)
            killed_at = time.monotonic()

        histories = await run_load(
            cs.target, N, TOKENS, fault, FAULT_AT, settle=4.0, token_ms=TOKEN_MS
        )
        # Rows are final once the edge's delivery confirmations (which wait for the outbox's
        # new leader) reached billing, or billing settled them undelivered (not charged).
        waited = await final_rows(cs.target, histories, DELIVERY_CONFIRM + 10)
        _report(victim, histories, killed_at, waited)
        _nothing_lost(histories, killed_at)
        info = await nc.jetstream(timeout=5).stream_info(stream)
        assert info.cluster is not None and info.cluster.leader not in (None, victim)
        await serves_again(cs.target)
        # A process started while the node is down connects to one of the two others.
        await asyncio.to_thread(cs.target.stack.restart, "router")
        await serves_again(cs.target)

        started = time.monotonic()
        cs.cluster.restart(victim)
        peers = await current_peers(nc, stream, within=30.0)
        print(f"{victim} rejoined, outbox replicas current after {time.monotonic() - started:.1f}s")
        assert victim in peers and len(peers) == REPLICAS
        await serves_again(cs.target)
    finally:
        await nc.close()


def _nothing_lost(histories: list[History], killed_at: float) -> None:
    check(histories, BOUND)
    complete = [h for h in histories if h.outcome == "complete"]
    for h in histories:
        if h.outcome != "complete":
            assert h.ended - killed_at <= ERROR_BOUND, (h.kind, h.ended - killed_at, h.error)
            assert not [r for r in h.rows if r["cost_micros"] > 0], (h.kind, h.rows)
    # Every complete answer is whole: no chunk was lost in a reconnection.
    assert {h.chars for h in complete} == {CHARS}, sorted(h.chars for h in complete)
    # 0 lost records: one complete row per complete answer, nothing else charged.
    rows = [r for h in histories for r in h.rows]
    assert sum(r["status"] == "complete" for r in rows) == len(complete)


def _report(victim: str, histories: list[History], killed_at: float, waited: float) -> None:
    rows = [r for h in histories for r in h.rows]
    print(
        f"killed {victim}:",
        summary(histories),
        "seconds",
        sorted(round(h.seconds, 1) for h in histories),
        "errors",
        sorted({(h.kind, round(h.ended - killed_at, 1), h.error[:80]) for h in histories
                if h.outcome != "complete"}),
        "rows",
        {s: sum(r["status"] == s for r in rows) for s in {r["status"] for r in rows}},
        f"rows final {waited:.1f}s after the load",
        "chars",
        sorted({h.chars for h in histories if h.outcome == "complete"}),
    )  # fmt: skip
