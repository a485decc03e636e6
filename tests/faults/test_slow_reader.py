"""A client that reads a long stream slowly, through the whole stack: the edge holds at most
``stream_buffer_bytes`` for it, ends its stream with the API's error event, stops the request
upstream and bills it as a client that left early; another stream on the same edge keeps its
pace meanwhile (docs/reliability.md, "Edge: a client that reads slowly"; docs/billing.md).

The slow client is a raw socket with a 4 KiB receive buffer that reads nothing until its stream
is cut. Its stream is a long one at the simulator's full speed: more than the kernel's socket
buffers on loopback and the cap together (at full speed the kernel's buffers stay small, a few
hundred KB; a slow producer lets them grow to a few MB).
"""

from __future__ import annotations

import asyncio
import json
import socket
import time

import anthropic
import asyncpg
import pytest
from support.clients import track

from .load import Gateway, another_edge

pytestmark = pytest.mark.timeout(180)
CAP = 1024 * 1024  # the default; well above a burst that arrives at once (a write is made
# whole while the client keeps up: docs/reliability.md)
TOKENS = 60_000  # about 7 MB of SSE events
PACED_TOKENS, PACED_MS = 30, 50  # the other stream: 1.5 s


async def paced_stream(t: Gateway) -> float:
    client = track(anthropic.AsyncAnthropic(base_url=t.url, api_key=t.key, max_retries=0))
    started = time.monotonic()
    text = ""
    prompt = f"Hi [sim:tokens={PACED_TOKENS} token_ms={PACED_MS}]"
    async with client.messages.stream(
        model="claude-sonnet-5-5",
        max_tokens=1024,
        messages=[{"role": "user", "content": prompt}],
    ) as s:
        async for chunk in s.text_stream:
            text += chunk
        final = await s.get_final_message()
    assert final.stop_reason == "end_turn" and len(text) == 4 * PACED_TOKENS
    return time.monotonic() - started


async def slow_client(t: Gateway, request_id: str) -> socket.socket:
    loop = asyncio.get_running_loop()
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    host, port = t.url.removeprefix("http://").split(":")
    await loop.sock_connect(sock, (host, int(port)))
    body = json.dumps(
        {
            "model": "claude-sonnet-5-5",
            "max_tokens": 64000,
            "stream": True,
            "messages": [{"role": "user", "content": f"Go [sim:tokens={TOKENS} token_ms=0]"}],
        }
    ).encode()
    head = (
        f"POST /v1/messages HTTP/1.1\r\nHost: {host}\r\nx-api-key: {t.key}\r\n"
        f"x-request-id: {request_id}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    )
    await loop.sock_sendall(sock, head.encode() + body)
    return sock


async def read_all(sock: socket.socket, timeout: float = 10.0) -> bytes:
    loop = asyncio.get_running_loop()
    data = bytearray()
    async with asyncio.timeout(timeout):
        while chunk := await loop.sock_recv(sock, 1 << 20):
            data += chunk
    return bytes(data)


HELD = "ezat_edge_stream_buffered_bytes_max"


async def held_until_cut(t: Gateway, name: str) -> tuple[float, float, float]:
    """The most the edge held for one stream (its gauge, sampled) until the cut, when it came,
    and what it still holds for the cut client (counted until the connection's reset)."""
    peak = 0.0
    started = time.monotonic()
    async with asyncio.timeout(60):
        while await t.sample(name, "ezat_edge_slow_readers_cut_total") < 1:
            peak = max(peak, await t.sample(name, HELD))
    return peak, time.monotonic() - started, await t.sample(name, HELD)


async def rows_of(t: Gateway, request_id: str) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(t.database_url)
    try:
        for _ in range(50):
            rows = await conn.fetch(
                "SELECT status, estimated, output_tokens, cost_micros FROM usage_records"
                " WHERE request_id = $1",
                request_id,
            )
            if rows:
                return rows
            await asyncio.sleep(0.2)
    finally:
        await conn.close()
    return []


async def test_a_slow_reader_is_cut_at_the_cap_billed_and_slows_no_other_stream(
    fault_stack: Gateway,
) -> None:
    with another_edge(fault_stack, "edge-slow", stream_buffer_bytes=CAP) as t:
        alone = await paced_stream(t)
        request_id = f"slow-{time.time_ns()}"
        sock = await slow_client(t, request_id)
        try:
            paced = asyncio.create_task(paced_stream(t))
            peak, cut_after, after_cut = await held_until_cut(t, "edge-slow")
            beside = await paced
            data = await read_all(sock)
        finally:
            sock.close()
        rows = await rows_of(t, request_id)
    print(
        f"held: sampled peak {peak:.0f} B, after the cut {after_cut:.0f} B (cap {CAP}); "
        f"cut {cut_after:.2f} s in; the client then read {len(data)} B"
    )
    print(f"paced stream alone {alone:.2f} s, beside the slow reader {beside:.2f} s; rows {rows}")
    assert peak <= CAP
    # Held for the cut client until its reset: under the cap (plus the error event). How far
    # under depends on the write that did not fit: a burst of up to ~450 KB arrives at once.
    assert 0 < after_cut <= CAP + 1024
    assert beside <= 1.5 * alone, "a slow reader slowed another stream"
    assert data.startswith(b"HTTP/1.1 200")
    assert data.endswith(b"\r\n0\r\n\r\n") and b"message_stop" not in data
    event = data[data.rindex(b"event: error") :]
    error = json.loads(event.split(b"data: ", 1)[1].split(b"\n", 1)[0])["error"]
    assert error["type"] == "invalid_request_error" and "read too slowly" in error["message"]
    # Stopped upstream and billed as a client that left early: what was produced, estimated.
    assert [(r["status"], r["estimated"]) for r in rows] == [("client_closed", True)]
    assert 0 < rows[0]["output_tokens"] < TOKENS and rows[0]["cost_micros"] > 0
