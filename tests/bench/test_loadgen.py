"""``bench/loadgen.py`` on ``bench/http1.py``: what the benchmark counts must be what a client got.

Against a real simulator: replies and streams are counted with their events and first token;
an HTTP error, a stream that reports an error and a stream cut short are errors, not results.
Against a raw socket server: a chunked body split at every awkward place decodes exactly, and a
connection closed mid-response is an error.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest_asyncio
from ezat_simulator.app import Settings, start

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import http1
import loadgen

MODEL = "claude-sonnet-5-5"


@pytest_asyncio.fixture
async def sim_url() -> AsyncIterator[str]:
    runner, url = await start(Settings(), "127.0.0.1", 0)
    yield url
    await runner.cleanup()


def target(url: str, stream: bool, extra: str = "", tokens: int = 20) -> loadgen.Target:
    body = loadgen.request_body("anthropic", stream, tokens, MODEL, extra)
    return loadgen.Target(
        url + "/v1/messages", loadgen.headers_for("anthropic", "k"), body, stream, "anthropic"
    )


async def test_replies_are_counted_with_their_latency(sim_url: str) -> None:
    result = await loadgen.run_phase(target(sim_url, False), 4, 60, warmup=0, requests=40)
    assert result["ok"] == 40 and result["errors"] == 0
    assert 0 < result["p50_ms"] <= result["p99_ms"]


async def test_streams_are_counted_event_by_event(sim_url: str) -> None:
    result = await loadgen.run_phase(target(sim_url, True, tokens=5), 3, 60, warmup=0, requests=30)
    assert result["ok"] == 30 and result["errors"] == 0
    # message_start, content_block_start, 5 deltas, content_block_stop, message_delta, message_stop
    assert result["events"] == 30 * 10
    assert 0 < result["ttft_p50_ms"] <= result["p50_ms"]


async def test_an_http_error_is_an_error_with_its_body(sim_url: str) -> None:
    result = await loadgen.run_phase(
        target(sim_url, True, " status=529"), 2, 60, warmup=0, requests=4
    )
    assert result["ok"] == 0 and result["errors"] == 4
    assert result["error_kinds"] == {"http 529": 4}
    assert "overloaded" in result["error_sample"]


async def test_a_stream_that_reports_an_error_is_an_error(sim_url: str) -> None:
    result = await loadgen.run_phase(
        target(sim_url, True, " fail_after=2"), 2, 60, warmup=0, requests=4
    )
    assert result["ok"] == 0 and result["error_kinds"] == {"event: error": 4}


async def test_a_stream_cut_short_is_an_error_and_the_next_request_reconnects(
    sim_url: str,
) -> None:
    cut = await loadgen.run_phase(target(sim_url, True, " drop_after=2"), 1, 60, 0, requests=3)
    assert cut["ok"] == 0 and cut["error_kinds"] == {"ServerDisconnected": 3}


# -- a raw server, to put the bytes where a well-behaved server would not -----------------------

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
EVENTS = [
    b'event: message_start\ndata: {"type":"message_start"}\n\n',
    b'event: content_block_delta\ndata: {"type":"content_block_delta"}\n\n',
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n',
]


def chunked(*pieces: bytes) -> bytes:
    return b"".join(b"%x;ext=1\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\nX-T: 1\r\n\r\n"


Serve = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def _raw_server(serve: Serve) -> tuple[asyncio.Server, int]:
    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


async def test_a_chunked_stream_split_anywhere_decodes_exactly() -> None:
    # One event split across two chunks, and the whole response written 7 bytes at a time.
    wire = HEAD + chunked(EVENTS[0], EVENTS[1][:20], EVENTS[1][20:], EVENTS[2])

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while await reader.readuntil(b"\r\n\r\n"):
            await reader.readexactly(2)  # the body below is b"{}"
            for i in range(0, len(wire), 7):
                writer.write(wire[i : i + 7])
                await writer.drain()
                await asyncio.sleep(0)

    server, port = await _raw_server(serve)
    try:
        t = loadgen.Target(f"http://127.0.0.1:{port}/s", {}, b"{}", True, "anthropic")
        result = await loadgen.run_phase(t, 1, 60, warmup=0, requests=3)
    finally:
        server.close()
    assert result["errors"] == 0, result["error_sample"]
    assert result["ok"] == 3 and result["events"] == 3 * 3


async def test_bytes_that_are_not_http_are_a_protocol_error() -> None:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(HEAD.replace(b"Transfer-Encoding: chunked", b"X: y") + b"body")
        await writer.drain()

    server, port = await _raw_server(serve)
    try:
        host, port, request = http1.encode_request(f"http://127.0.0.1:{port}/", {}, b"")
        conn = await http1.connect(host, port)
        resp = conn.send(request)
        try:
            await asyncio.wait_for(resp.done, 5)
            raise AssertionError("a response without a length was accepted")
        except http1.ProtocolError as exc:
            assert "Content-Length" in str(exc)
    finally:
        server.close()
