"""ezat_common.readiness.serve when the metrics port is still held: a rolling restart's
replacement takes work while its predecessor drains on the same port, so the replacement binds
the port once it is free instead of crashing (the fault suite's router restart hit this). Only
under a supervisor (``EZAT_DRAIN_DIR`` set) can there be such a predecessor: anywhere else the
port is another program's and the start stops, naming the key (issue 27)."""

from __future__ import annotations

import asyncio
import socket
import urllib.request
from pathlib import Path

import pytest
from ezat_cli.infra import free_port
from ezat_common import environment, preflight, readiness


def _status(port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as resp:
            return int(resp.status)
    except OSError:
        return 0


async def test_a_port_held_by_a_predecessor_is_bound_once_it_is_released(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(environment.DRAIN_DIR, str(tmp_path))  # as `ezat up` starts services
    port = free_port()
    predecessor = socket.create_server(("127.0.0.1", port))
    try:
        assert readiness.serve(f"127.0.0.1:{port}", readiness.Readiness("router")) is None
        await asyncio.sleep(0.3)
    finally:
        predecessor.close()  # the predecessor exits
    for _ in range(50):
        if await asyncio.to_thread(_status, port) == 200:
            return
        await asyncio.sleep(0.1)
    raise AssertionError("the port was not bound after the predecessor released it")


async def test_without_a_supervisor_a_port_in_use_stops_the_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(environment.DRAIN_DIR, raising=False)
    port = free_port()
    taken = rf"router.metrics_listen: 127.0.0.1:{port} is already in use"
    with socket.create_server(("127.0.0.1", port)), pytest.raises(preflight.PortInUse, match=taken):
        readiness.serve(f"127.0.0.1:{port}", readiness.Readiness("router"))
