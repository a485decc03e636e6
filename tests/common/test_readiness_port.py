"""ezat_common.readiness.serve when the metrics port is still held: a rolling restart's
replacement takes work while its predecessor drains on the same port, so the replacement binds
the port once it is free instead of crashing (the fault suite's router restart hit this)."""

from __future__ import annotations

import asyncio
import socket
import urllib.request

from ezat_cli.infra import free_port
from ezat_common import readiness


def _status(port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as resp:
            return int(resp.status)
    except OSError:
        return 0


async def test_a_port_held_by_a_predecessor_is_bound_once_it_is_released() -> None:
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
