"""Embedded servers killed under `ezat up`-style supervision come back on the same address with
their data, and the services reconnect by themselves (docs/reliability.md, "Supervision")."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import nats
import pytest
import redis.asyncio as aioredis
from ezat_cli.infra import Embedded

from .conftest import FaultStack, until_ok

pytestmark = pytest.mark.timeout(90)

# Bound on "killed" -> "a request through the gateway succeeds again" (measured: docs).
RECOVERY_BOUND = 10.0


def sigkill(server: Embedded) -> int:
    pid = server.pid
    assert pid is not None and server.alive
    os.kill(pid, signal.SIGKILL)
    return pid


async def wait_restarted(server: Embedded, old_pid: int, timeout: float = 15.0) -> float:
    start = time.monotonic()
    while not (server.alive and server.pid != old_pid):
        assert time.monotonic() - start < timeout, f"{server.name} was not restarted"
        await asyncio.sleep(0.05)
    return time.monotonic() - start


def service_restarts(fs: FaultStack) -> dict[str, int]:
    return {name: c.restarts for name, c in fs.stack.children.items()}


async def test_sigkill_nats_restarts_it_with_its_jetstream_data(fault_stack: FaultStack) -> None:
    fs = fault_stack
    server = fs.infra.server("nats")
    assert server is not None
    assert await fs.ask()
    url = fs.infra.nats_url
    nc = await nats.connect(url)
    js = nc.jetstream()
    await js.add_stream(name="faults_keep", subjects=["faults.keep"], storage="file")
    await js.publish("faults.keep", b"kept across a crash")
    await nc.close()
    before = service_restarts(fs)

    old = sigkill(server)
    restarted_in = await wait_restarted(server, old)
    _, recovered_in = await until_ok(fs.ask, RECOVERY_BOUND)
    print(f"nats: restarted in {restarted_in:.2f}s, requests ok again after {recovered_in:.2f}s")

    assert fs.infra.nats_url == url  # same port: the services' clients just reconnect
    assert service_restarts(fs) == before, "services had to be restarted"
    nc = await nats.connect(url)
    try:
        msg = await nc.jetstream().get_msg("faults_keep", 1)
        assert msg.data == b"kept across a crash"
        # The services' own JetStream state survived too: the usage outbox still exists.
        names = [s.config.name for s in await nc.jetstream().streams_info()]
        assert any(n.endswith("_billing_outbox") for n in names), names
    finally:
        await nc.close()
    assert server.restarts >= 1


async def test_sigkill_postgres_restarts_it_and_requests_succeed(fault_stack: FaultStack) -> None:
    fs = fault_stack
    server = fs.infra.server("postgres")
    assert server is not None
    assert await fs.ask()
    before = service_restarts(fs)

    old = sigkill(server)
    restarted_in = await wait_restarted(server, old)
    # A new key: the edge must read PostgreSQL to authenticate it (nothing cached).
    key, key_in = await until_ok(fs.new_key, RECOVERY_BOUND)
    fresh = FaultStack(fs.stack, fs.url, key)
    _, recovered_in = await until_ok(fresh.ask, RECOVERY_BOUND)
    print(
        f"postgres: restarted in {restarted_in:.2f}s, new key after {key_in:.2f}s, "
        f"requests with it ok after {key_in + recovered_in:.2f}s"
    )
    assert service_restarts(fs) == before, "services had to be restarted"
    # Same data folder: the key made before the crash is still there.
    assert await fs.ask()


async def test_sigkill_redis_restarts_it_on_the_same_port(fault_stack: FaultStack) -> None:
    fs = fault_stack
    server = fs.infra.server("redis")
    assert server is not None
    assert await fs.ask()
    before = service_restarts(fs)

    old = sigkill(server)
    restarted_in = await wait_restarted(server, old)
    client = aioredis.from_url(fs.infra.redis_url)
    try:

        async def ping_and_use() -> None:
            assert await client.ping()
            # A session request makes the router bind it in Redis: its client reconnected.
            await fs.ask(session="after-redis-restart")
            assert any([k async for k in client.scan_iter("*aff:*")])

        _, recovered_in = await until_ok(ping_and_use, RECOVERY_BOUND)
    finally:
        await client.aclose()
    print(f"redis: restarted in {restarted_in:.2f}s, in use again after {recovered_in:.2f}s")
    assert service_restarts(fs) == before, "services had to be restarted"
