"""What every service exports about its NATS connection (``bus.connect``) and its process, as an
operator reads it: the connection state follows a server that stops and comes back, each lost
and regained connection is counted once, each message a flooded subscription drops is counted,
and a service's ``/metrics`` carries these beside the process metrics."""

from __future__ import annotations

import asyncio
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
from ezat_cli import infra
from ezat_common import bus, environment, metrics, readiness
from nats.aio.msg import Msg
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

CONNECTED = "ezat_nats_connected"
DISCONNECTS = "ezat_nats_disconnects_total"
RECONNECTS = "ezat_nats_reconnects_total"
SLOW = "ezat_nats_slow_consumer_errors_total"
WAIT = 10.0  # bounded: a reconnect takes about reconnect_time_wait (0.5 s)


def sample(name: str) -> float | None:
    return REGISTRY.get_sample_value(name)


async def until(condition: Callable[[], bool], what: str) -> None:
    try:
        async with asyncio.timeout(WAIT):
            while not condition():
                await asyncio.sleep(0.02)
    except TimeoutError:
        raise AssertionError(f"not within {WAIT} s: {what}") from None


@pytest.fixture
def own_server(tmp_path: Path) -> Iterator[infra.ProcessServer]:
    """A nats-server of this test alone, on a free port, that it may stop and start again."""
    server = infra.nats_server(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


async def service_connection(url: str, monkeypatch: pytest.MonkeyPatch) -> bus.Client:
    monkeypatch.setenv(environment.NATS_URL, url)
    monkeypatch.delenv(environment.TAKE_OVER_FROM, raising=False)
    return await bus.connect("test-nats-metrics")


@pytest.fixture
async def session_connection(
    nats_url: str, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[bus.Client]:
    nc = await service_connection(nats_url, monkeypatch)
    try:
        yield nc
    finally:
        await nc.close()


async def test_the_state_follows_a_server_that_stops_and_comes_back(
    own_server: infra.ProcessServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    nc = await service_connection(f"nats://127.0.0.1:{own_server.port}", monkeypatch)
    try:
        assert sample(CONNECTED) == 1.0
        disconnects, reconnects = sample(DISCONNECTS) or 0.0, sample(RECONNECTS) or 0.0

        await asyncio.to_thread(own_server.stop)
        await until(lambda: sample(CONNECTED) == 0.0, "connected 0 once the server is gone")
        await until(lambda: sample(DISCONNECTS) == disconnects + 1, "one disconnect counted")
        assert sample(RECONNECTS) == reconnects

        await asyncio.to_thread(own_server.start)  # the same port, as a restarted pod's service
        await until(lambda: sample(RECONNECTS) == reconnects + 1, "one reconnect counted")
        assert sample(CONNECTED) == 1.0
        assert sample(DISCONNECTS) == disconnects + 1
        await nc.flush(timeout=WAIT)  # and it carries traffic again
    finally:
        await nc.close()
    assert sample(CONNECTED) == 0.0
    assert sample(DISCONNECTS) == disconnects + 1, "the process's own close is no lost connection"


async def test_each_message_a_flooded_subscription_drops_is_counted(
    session_connection: bus.Client,
) -> None:
    nc = session_connection
    release = asyncio.Event()

    async def stuck(msg: Msg) -> None:
        await release.wait()

    # One message in the handler, one pending: every other one is dropped by the client.
    sub = await nc.subscribe("ezat.test.nats_metrics.flood", cb=stuck, pending_msgs_limit=1)
    before = sample(SLOW) or 0.0
    flood = 50
    try:
        for _ in range(flood):
            await nc.publish("ezat.test.nats_metrics.flood", b"x")
        await nc.flush(timeout=WAIT)
        await until(lambda: (sample(SLOW) or 0.0) >= before + flood - 2, "the drops counted")
        assert (sample(SLOW) or 0.0) <= before + flood
    finally:
        release.set()
        await sub.unsubscribe()


def families(text: str) -> dict[str, float]:
    return {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples}


async def test_a_services_metrics_endpoint_shows_nats_and_process_series(
    session_connection: bus.Client,
) -> None:
    port = infra.free_port()
    # As router, billing, translator and fetcher serve their metrics port.
    server = readiness.serve(f"127.0.0.1:{port}", readiness.Readiness("test"))
    assert server is not None
    try:
        url = f"http://127.0.0.1:{port}/metrics"
        scraped = await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=5).read())
    finally:
        await server.close()
    edge, _content_type = metrics.exposition()  # the edge's /metrics route
    for body in (scraped, edge):
        series = families(body.decode())
        assert series[CONNECTED] == 1.0
        for name in (DISCONNECTS, RECONNECTS, SLOW):
            assert name in series
        assert series["process_resident_memory_bytes"] > 0
        assert series["process_cpu_seconds_total"] > 0
        assert "python_gc_objects_collected_total" in series  # the GC collector
        assert "python_info" in series  # the platform collector
