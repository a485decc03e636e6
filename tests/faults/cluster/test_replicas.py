"""On the 3-node cluster with ``EZAT_JETSTREAM_REPLICAS=3`` the streams the gateway keeps have
three replicas: the usage outbox, made with one before the services started (as a single-server
deployment left it), is moved to three by the services; the claim-check bucket is made with three
(docs/reliability.md, "A 3-node NATS cluster")."""

from __future__ import annotations

import asyncio
import time

import nats

from .conftest import REPLICAS, ClusterStack


async def test_the_outbox_and_the_claim_bucket_have_three_replicas(
    cluster_stack: ClusterStack,
) -> None:
    cs = cluster_stack
    nc = await nats.connect(servers=cs.cluster.url.split(","))
    try:
        js = nc.jetstream(timeout=5)
        deadline = time.monotonic() + 10
        while (await js.stream_info(cs.subjects.outbox_stream)).config.num_replicas != REPLICAS:
            assert time.monotonic() < deadline, "the outbox stream kept one replica"
            await asyncio.sleep(0.2)
        # A body above max_payload travels as a claim check in the translator's bucket (which it
        # made at its start).
        big = "word " * 220_000 + "[sim:tokens=3]"
        reply = await cs.target.anthropic().messages.create(
            model="claude-sonnet-5-5", max_tokens=16, messages=[{"role": "user", "content": big}]
        )
        assert reply.stop_reason == "end_turn"
        info = await js.stream_info(f"OBJ_{cs.subjects.payload_bucket('translator')}")
        assert info.config.num_replicas == REPLICAS
    finally:
        await nc.close()
