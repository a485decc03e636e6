"""A stack of its own on a 3-node NATS cluster (docs/reliability.md, "A 3-node NATS cluster"):
three ``nats-server`` processes on loopback ports (``ezat_cli.nats_cluster``), the services given
all three in ``NATS_URL`` and ``EZAT_JETSTREAM_REPLICAS=3``, the session's PostgreSQL and Redis
under a database and subject prefix of its own, supervised as ``ezat up`` does. The NATS nodes
are not supervised: a test kills one and decides when it comes back.

Before the services start, the usage outbox stream is made with one replica, as a deployment
that ran on a single server left it: the services must move it to three.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import nats
import pytest
from ezat_cli.infra import Infra, free_port
from ezat_cli.nats_cluster import NatsCluster, nats_cluster
from ezat_common import outbox
from ezat_common.subjects import Subjects
from support.config import base_url
from support.stack import free_ports, key, running

from ..conftest import faults_config
from ..load import Gateway, History, attach_rows

PREFIX = "cluster"
REPLICAS = 3
# Longer than the outbox stream's leader election after a SIGKILL (~7 s measured) plus the
# edge's retries of its delivery confirmations: a confirmation that waits for the new leader
# still lands before billing settles its record (docs/billing.md, "Billed only when delivered").
DELIVERY_CONFIRM = 15.0


@dataclass
class ClusterStack:
    target: Gateway
    cluster: NatsCluster
    subjects: Subjects


async def _single_replica_outbox(url: str, subjects: Subjects) -> None:
    nc = await nats.connect(servers=url.split(","))
    try:
        await nc.jetstream().add_stream(outbox.stream_config(subjects, replicas=1))
    finally:
        await nc.close()


@pytest.fixture(scope="package")
def cluster_stack(infra: Infra, database_url: str, data_dir: Path) -> Iterator[ClusterStack]:
    folder = data_dir / f"cluster-{free_port()}"
    folder.mkdir()
    cluster = nats_cluster(folder)
    cluster.start(timeout=60)
    subjects = Subjects(prefix=PREFIX)
    ports = free_ports("edge", "sim", "router_metrics", "translator_metrics")
    config = faults_config(folder / "ezat-cluster.toml", ports, DELIVERY_CONFIRM)
    stack_infra = Infra(cluster.url, database_url, infra.redis_url, servers=[*cluster.servers])
    try:
        asyncio.run(_single_replica_outbox(cluster.url, subjects))
    except BaseException:
        stack_infra.stop()  # the cluster's nodes, which the stack would have stopped
        raise
    env = {"EZAT_JETSTREAM_REPLICAS": str(REPLICAS)}
    with running(config, stack_infra, PREFIX, env=env) as stack:
        metrics = {
            "router": base_url(ports["router_metrics"]) + "/metrics",
            "translator": base_url(ports["translator_metrics"]) + "/metrics",
        }
        secret = key(database_url, "faults")
        target = Gateway(stack, base_url(ports["edge"]), secret, database_url, metrics)
        yield ClusterStack(target, cluster, subjects)


async def final_rows(t: Gateway, histories: list[History], within: float) -> float:
    """Wait until every answer a client saw complete has its usage row (billing has caught up
    with the outbox, whose leader may have just moved) and no row of these requests awaits its
    delivery confirmation (each was confirmed, or settled undelivered), with the rows read into
    the histories: final now. Seconds waited; raises past ``within``."""
    started = time.monotonic()
    while True:
        await attach_rows(t, histories)
        waiting = sum(1 for h in histories for r in h.rows if r["awaiting_delivery"])
        missing = sum(1 for h in histories if h.outcome == "complete" and not h.rows)
        if not (waiting or missing):
            return time.monotonic() - started
        assert time.monotonic() - started < within, (
            f"{waiting} rows still awaiting delivery, {missing} complete answers without a row"
        )
        await asyncio.sleep(0.2)


async def step_down(nc: nats.NATS, stream: str, preferred: str) -> str:
    """Move ``stream``'s leader to node ``preferred`` (JetStream's leader step-down with a
    preferred placement); the leader it has then."""
    js = nc.jetstream(timeout=5)
    # Only a current follower can take over (a stream just moved to 3 replicas is catching up).
    await current_peers(nc, stream, within=20.0)
    for _ in range(20):
        info = await js.stream_info(stream)
        if info.cluster is not None and info.cluster.leader == preferred:
            return preferred
        body = json.dumps({"placement": {"preferred": preferred}}).encode()
        await nc.request(f"$JS.API.STREAM.LEADER.STEPDOWN.{stream}", body, timeout=5)
        await asyncio.sleep(0.5)
    info = await js.stream_info(stream)
    return str(info.cluster.leader if info.cluster else None)


async def current_peers(nc: nats.NATS, stream: str, within: float) -> set[str]:
    """The stream's leader and followers that are current, once all of them are (empty past
    ``within`` seconds)."""
    js = nc.jetstream(timeout=5)
    deadline = time.monotonic() + within
    while True:
        info = await js.stream_info(stream)
        cluster = info.cluster
        if cluster is not None and cluster.leader:
            followers = {p.name for p in cluster.replicas or [] if p.current and not p.offline}
            peers = {cluster.leader, *(n for n in followers if n)}
            if len(peers) == info.config.num_replicas:
                return peers
        if time.monotonic() > deadline:
            return set()
        await asyncio.sleep(0.2)
