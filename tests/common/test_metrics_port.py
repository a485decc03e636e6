"""The bounded metrics port (``ezat_common.metrics_port``, issue 26): prometheus-client's server
gave each connection a thread and never timed one out, so idle connections piled up threads.
Here 200 idle connections leave at most ``max_connections`` held, those are closed after the
head timeout, and a scrape is answered; a kept-alive scraper is served twice on one connection."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
from ezat_cli.infra import free_port
from ezat_common import readiness
from ezat_common.metrics_port import MetricsPort

LIMIT = 16
TIMEOUT = 1.0


def _closed(reader: asyncio.StreamReader) -> bool:
    """Whether the server closed the connection (EOF, or a reset) by now."""
    return reader.at_eof() or reader.exception() is not None


async def _get(port: int, path: str) -> tuple[bytes, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        data = await asyncio.wait_for(reader.read(), 5)
    finally:
        writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return head.split(b"\r\n")[0], body


@pytest.fixture
async def served() -> AsyncIterator[tuple[MetricsPort, int]]:
    server = MetricsPort(readiness.answers(readiness.Readiness("test")), LIMIT, TIMEOUT)
    number = free_port()
    assert server.bind(f"127.0.0.1:{number}")
    yield server, number
    await server.close()


async def test_idle_connections_are_bounded_and_timed_out(
    served: tuple[MetricsPort, int],
) -> None:
    port, number = served
    conns = [await asyncio.open_connection("127.0.0.1", number) for _ in range(200)]
    opened = time.monotonic()
    await asyncio.sleep(0.3)
    assert port.open == LIMIT
    closed = [_closed(r) for r, _ in conns]
    assert sum(closed) == 200 - LIMIT  # beyond the bound: closed at once
    while port.open and time.monotonic() - opened < TIMEOUT + 2.0:
        await asyncio.sleep(0.05)
    # Generous margin over the 1 s head timeout: a loaded two-core machine.
    assert port.open == 0, "idle connections were not closed after the head timeout"
    assert all([_closed(r) for r, _ in conns])
    status, body = await _get(number, "/metrics")
    assert status == b"HTTP/1.1 200 OK"
    assert b"ezat_ready" in body
    for _, w in conns:
        w.close()


async def test_a_kept_alive_scraper_is_served_again_and_probes_answer(
    served: tuple[MetricsPort, int],
) -> None:
    _, number = served
    reader, writer = await asyncio.open_connection("127.0.0.1", number)
    for path in ("/healthz", "/readyz"):
        writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        length = int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0])
        body = await reader.readexactly(length)
        expected = {"/healthz": b"200 OK", "/readyz": b"503 Service Unavailable"}[path]
        assert head.startswith(b"HTTP/1.1 " + expected), head
        assert body.startswith(b'{"status":')
    writer.close()
    assert (await _get(number, "/nothing"))[0] == b"HTTP/1.1 404 Not Found"


async def test_a_head_dripped_byte_by_byte_is_cut_at_the_head_timeout(
    served: tuple[MetricsPort, int],
) -> None:
    # Slowloris: each byte well within the timeout, the whole head never; the bound is on the
    # whole head (prometheus-client's server had no timeout at all).
    port, number = served
    reader, writer = await asyncio.open_connection("127.0.0.1", number)
    started = time.monotonic()
    for byte in b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"y" * 100:
        if _closed(reader):
            break
        writer.write(bytes([byte]))
        await asyncio.sleep(0.1)
    elapsed = time.monotonic() - started
    assert _closed(reader)
    assert TIMEOUT <= elapsed < TIMEOUT + 1.5, elapsed  # margin: a loaded two-core machine
    assert port.open == 0
    writer.close()
