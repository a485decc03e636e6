"""``bench/loadgen.py`` on ``ezat_http1``: what the benchmark counts must be what a client got.

Against a real simulator: replies and streams are counted with their events and first token
(SSE, and the AWS event stream of its Bedrock face); an HTTP error, a stream that reports an
error and a stream cut short are errors, not results; a paced phase keeps to its rate.
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
from ezat_simulator.sigv4 import AwsCredential, BedrockAuth

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import kind_phases
import loadgen
from stackrun import AWS_KEY_ID, AWS_SECRET, BEDROCK_API_KEY

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


async def test_a_stream_cut_short_is_an_error_and_the_worker_goes_on(sim_url: str) -> None:
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


class Scripted:
    """A raw server answering each request with the next of ``replies`` (the last one repeats),
    written in ``step``-byte pieces; it counts the connections it accepted."""

    def __init__(self, *replies: bytes, step: int = 5) -> None:
        self.replies = list(replies)
        self.step = step
        self.connections = 0
        self.served = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                await reader.readexactly(length)
                reply = self.replies[min(self.served, len(self.replies) - 1)]
                self.served += 1
                for i in range(0, len(reply), self.step):
                    writer.write(reply[i : i + self.step])
                    await writer.drain()
                    await asyncio.sleep(0)
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()


async def run_scripted(
    script: Scripted, stream: bool, requests: int, timeout: float = 5.0
) -> dict[str, object]:
    server, port = await _raw_server(script.serve)
    try:
        t = loadgen.Target(f"http://127.0.0.1:{port}/s", {}, b"{}", stream, "anthropic")
        return await loadgen.run_phase(t, 1, 60, warmup=0, requests=requests, timeout=timeout)
    finally:
        server.close()


def fixed(status: str, body: bytes, extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 %s\r\nContent-Length: %d\r\n%s\r\n%s" % (
        status.encode(),
        len(body),
        extra,
        body,
    )


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


async def test_bytes_that_are_not_http_are_a_bad_response() -> None:
    result = await run_scripted(Scripted(b"SSH-2.0-OpenSSH_9.6\r\n\r\n"), False, requests=1)
    assert result["error_kinds"] == {"BadResponse": 1}
    assert "bad status line" in str(result["error_sample"])


async def test_a_reply_without_a_length_ends_with_its_connection() -> None:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        await reader.readexactly(2)  # the body below is b"{}"
        writer.write(b"HTTP/1.1 200 OK\r\n\r\n" + EVENTS[0] + EVENTS[2])
        await writer.drain()
        writer.close()

    server, port = await _raw_server(serve)
    try:
        t = loadgen.Target(f"http://127.0.0.1:{port}/s", {}, b"{}", True, "anthropic")
        result = await loadgen.run_phase(t, 1, 60, warmup=0, requests=2)
    finally:
        server.close()
    assert result["ok"] == 2 and result["events"] == 2 * 2


async def test_replies_split_anywhere_reuse_one_connection_after_an_http_error() -> None:
    script = Scripted(
        fixed("500 Internal Server Error", b'{"error":"boom"}'), fixed("200 OK", b"{}")
    )
    result = await run_scripted(script, False, requests=4)
    assert result["ok"] == 3 and result["error_kinds"] == {"http 500": 1}
    assert "boom" in str(result["error_sample"])
    assert script.connections == 1


async def test_connection_close_means_a_new_connection_per_request() -> None:
    script = Scripted(fixed("200 OK", b"{}", b"Connection: close\r\n"))
    result = await run_scripted(script, False, requests=3)
    assert result["ok"] == 3 and result["errors"] == 0
    assert script.connections == 3


async def test_a_server_that_never_answers_times_out() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(30)

    server, port = await _raw_server(silent)
    try:
        t = loadgen.Target(f"http://127.0.0.1:{port}/s", {}, b"{}", False, "anthropic")
        result = await loadgen.run_phase(t, 1, 60, warmup=0, requests=2, timeout=0.3)
    finally:
        server.close()
    assert result["ok"] == 0 and result["error_kinds"] == {"TimeoutError": 2}


async def test_a_stream_that_ends_cleanly_without_its_end_marker_is_an_error() -> None:
    script = Scripted(HEAD + chunked(EVENTS[0], EVENTS[1]))
    result = await run_scripted(script, True, requests=2)
    assert result["ok"] == 0
    assert result["error_kinds"] == {"stream ended without its end marker": 2}


async def test_broken_chunk_framing_is_a_protocol_error() -> None:
    for wire in (
        HEAD + b"5\r\nhelloXX0\r\n\r\n",  # chunk data not followed by CRLF
        HEAD + b"-5\r\nhello\r\n0\r\n\r\n",  # a negative size
        HEAD + b"0x5\r\nhello\r\n0\r\n\r\n",  # not bare hex digits
    ):
        result = await run_scripted(Scripted(wire), True, requests=1)
        assert result["error_kinds"] == {"BadResponse": 1}, wire


async def test_an_interim_response_is_skipped_and_204_has_no_body() -> None:
    interim = b"HTTP/1.1 100 Continue\r\n\r\n" + fixed("200 OK", b"{}")
    result = await run_scripted(Scripted(interim, b"HTTP/1.1 204 No Content\r\n\r\n"), False, 3)
    assert result["ok"] == 3 and result["errors"] == 0


# -- the Bedrock face answered directly, and paced phases ----------------------------------------


@pytest_asyncio.fixture
async def bedrock_sim_url() -> AsyncIterator[str]:
    """A simulator whose Bedrock face checks the bench's AWS key (stackrun.AWS_KEY_ID)."""
    auth = BedrockAuth(
        credentials=(AwsCredential(AWS_KEY_ID, AWS_SECRET),), api_keys=(BEDROCK_API_KEY,)
    )
    runner, url = await start(Settings(bedrock=auth), "127.0.0.1", 0)
    yield url
    await runner.cleanup()


def bedrock_target(
    url: str, stream: bool, extra: str = "", tokens: int = 5, auth: str = "sigv4"
) -> loadgen.Target:
    body = loadgen.request_body("anthropic", stream, tokens, MODEL, extra)
    return kind_phases.direct_bedrock(url, stream, body, auth)


async def test_an_event_stream_is_counted_chunk_by_chunk(bedrock_sim_url: str) -> None:
    result = await loadgen.run_phase(
        bedrock_target(bedrock_sim_url, True), 3, 60, warmup=0, requests=30
    )
    assert result["ok"] == 30 and result["errors"] == 0, result["error_sample"]
    assert result["events"] == 30 * 10  # one chunk per Anthropic event, as the SSE count
    assert 0 < result["ttft_p50_ms"] <= result["p50_ms"]
    whole = await loadgen.run_phase(bedrock_target(bedrock_sim_url, False), 2, 60, 0, requests=6)
    assert whole["ok"] == 6 and whole["errors"] == 0, whole["error_sample"]
    # --bedrock-auth key: the same face, with the bench's Bedrock API key.
    keyed = bedrock_target(bedrock_sim_url, True, auth="key")
    assert keyed.headers["authorization"].startswith("Bearer ")
    result = await loadgen.run_phase(keyed, 2, 60, warmup=0, requests=6)
    assert result["ok"] == 6 and result["errors"] == 0, result["error_sample"]


async def test_an_exception_in_an_event_stream_is_an_error(bedrock_sim_url: str) -> None:
    result = await loadgen.run_phase(
        bedrock_target(bedrock_sim_url, True, " fail_after=2"), 2, 60, warmup=0, requests=4
    )
    assert result["ok"] == 0 and result["error_kinds"] == {"event: error": 4}


async def test_a_paced_phase_keeps_to_its_rate(sim_url: str) -> None:
    """Eight workers that could do thousands a second start 100 a second, not in bursts."""
    result = await loadgen.run_phase(target(sim_url, False), 8, 1.5, warmup=0.2, rate=100.0)
    assert result["errors"] == 0
    assert 80 <= result["per_s"] <= 102, result["per_s"]
    free = await loadgen.run_phase(target(sim_url, False), 8, 0.5, warmup=0)
    assert free["per_s"] > 3 * result["per_s"]  # unpaced, the same workers go far faster
