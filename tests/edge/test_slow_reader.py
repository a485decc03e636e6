"""A client that reads a stream slowly has bounded memory at the edge, and other streams keep their
pace (docs/reliability.md, "Edge: a client that reads slowly").

Real NATS and the edge's real ``Relay`` behind aiohttp; a fake holder streams 8 MB as fast as it
can (more than the kernel's socket buffers, a few MB on loopback, and the cap) and stops when it
hears the request's cancel, as a router does. The slow client is a raw socket with a 4 KiB
receive buffer that reads nothing until its stream is cut.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from ezat_common import envelopes
from ezat_common.envelopes import CancelRequest, ClientRequest, ReplyChunk, ReplyEnd, ReplyHead
from ezat_edge import metrics as m
from ezat_edge import streams
from ezat_edge.responses import Format
from nats.aio.msg import Msg

from .test_owner_liveness import STREAM_END, STREAM_START, Holder, holding

CAP = 256 * 1024
EVENT = b'event: content_block_delta\ndata: {"text":"' + b"y" * 1000 + b'"}\n\n'
LONG = 8000  # events of the slow client's stream: 8 MB
PACED = 20  # events of the other stream, one every PACE seconds
PACE = 0.05


@dataclass
class Scene:
    holder: Holder
    server: TestServer
    cancels: list[CancelRequest] = field(default_factory=list)
    # The slow stream's transport and protocol, as its handler saw them.
    slow: dict[str, object] = field(default_factory=dict)


async def streams_as_asked(h: Holder, env: ClientRequest, n: int, scene: Scene) -> None:
    """The slow client's stream as fast as NATS takes it, until cancelled; the other paced."""
    await h.send(env, ReplyHead(data=STREAM_START))
    if env.session == "/paced":
        for _ in range(PACED):
            await asyncio.sleep(PACE)
            await h.send(env, ReplyChunk(data=EVENT))
    else:
        for i in range(LONG):
            await h.send(env, ReplyChunk(data=EVENT))
            if i % 50 == 0:
                await asyncio.sleep(0.001)
                if any(c.uid == env.uid for c in scene.cancels):
                    return  # a router stops the upstream call here
    await h.send(env, ReplyEnd(data=STREAM_END))


@pytest.fixture
async def scene(nats_url: str) -> AsyncIterator[Scene]:
    async with holding(nats_url, ping_interval=10.0, confirm=True, stream_buffer_bytes=CAP) as h:
        scene: Scene

        async def handler(request: web.Request) -> web.StreamResponse:
            fmt: Format = "openai" if request.query.get("fmt") == "openai" else "anthropic"
            call = h.call(fmt, request)
            call.envelope.session = request.path  # tells the fake holder which stream it is
            if request.path == "/slow":
                scene.slow.update(transport=request.transport, protocol=request.protocol)
            return await h.relay.run(call, b"{}")

        async def on_cancel(msg: Msg) -> None:
            cancel = envelopes.decode_cancel(msg.data)
            scene.cancels.append(cancel)

        app = web.Application()
        app.router.add_post("/slow", handler)
        app.router.add_post("/paced", handler)
        async with TestServer(app) as server:
            scene = Scene(h, server)
            await h.behave(lambda h, env, n: streams_as_asked(h, env, n, scene))
            await h.nc.subscribe(h.subjects.cancel, cb=on_cancel)
            yield scene


async def paced_stream(scene: Scene) -> float:
    """Seconds the paced stream took, read as it arrives; it must be whole."""
    started = time.monotonic()
    async with (
        aiohttp.ClientSession() as http,
        http.post(scene.server.make_url("/paced"), data=b"{}") as resp,
    ):
        body = await resp.read()
    assert body.startswith(STREAM_START) and body.endswith(STREAM_END)
    assert body.count(b"content_block_delta") == PACED
    return time.monotonic() - started


async def slow_client(scene: Scene, fmt: Format) -> socket.socket:
    """A request for the long stream from a socket that takes 4 KiB at a time, then reads not."""
    loop = asyncio.get_running_loop()
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    server = scene.server
    await loop.sock_connect(sock, (server.host, server.port))
    head = f"POST /slow?fmt={fmt} HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{{}}"
    await loop.sock_sendall(sock, head.encode())
    return sock


async def read_all(sock: socket.socket, timeout: float = 10.0) -> bytes:
    loop = asyncio.get_running_loop()
    data = bytearray()
    async with asyncio.timeout(timeout):
        while chunk := await loop.sock_recv(sock, 1 << 20):
            data += chunk
    return bytes(data)


def cut_count() -> float:
    return m.SLOW_READERS_CUT._value.get()


async def held_until_cut(scene: Scene, before: float) -> int:
    """The most the edge held for its streams, sampled until the slow stream is cut."""
    peak = 0
    async with asyncio.timeout(30):
        while cut_count() == before:
            peak = max(peak, scene.holder.relay.outlets.largest())
            await asyncio.sleep(0.002)
    return peak


@pytest.mark.parametrize("fmt", ["anthropic", "openai"])
async def test_a_slow_reader_is_cut_at_the_cap_and_the_other_stream_keeps_its_pace(
    scene: Scene, fmt: Format
) -> None:
    alone = await paced_stream(scene)
    before = cut_count()
    sock = await slow_client(scene, fmt)
    paced = asyncio.create_task(paced_stream(scene))
    try:
        peak = await held_until_cut(scene, before)
        transport = scene.slow["transport"]
        assert isinstance(transport, asyncio.Transport)
        held_at_cut = transport.get_write_buffer_size()
        beside = await paced
        data = await read_all(sock)  # the client reads again: it gets the rest, then the end
    finally:
        sock.close()
    print(f"{fmt}: peak {peak} B, held at the cut {held_at_cut} B, read {len(data)} B")
    print(f"paced stream alone {alone:.3f} s, beside the slow reader {beside:.3f} s")
    assert cut_count() == before + 1
    assert peak <= CAP
    # It filled up to the cap and stopped there: never more than the cap and the error event.
    assert CAP / 2 < held_at_cut <= CAP + 1024
    assert beside <= 1.5 * alone, "a slow reader slowed another stream"
    # The end of the stream: the error event in the API's format, the last chunk, closed.
    assert data.endswith(b"\r\n0\r\n\r\n")
    assert b"message_stop" not in data
    tail = data[data.rindex(b"\r\n", 0, -7) :]
    if fmt == "anthropic":
        event = tail[tail.index(b"event: error") :]
        error = json.loads(event.split(b"data: ", 1)[1].split(b"\n", 1)[0])["error"]
        assert error["type"] == "invalid_request_error"
    else:
        assert b"data: [DONE]\n\n" in tail
        line = tail[tail.index(b'data: {"error"') :].split(b"\n", 1)[0]
        error = json.loads(line.removeprefix(b"data: "))["error"]
        assert error["type"] == "invalid_request_error"
    assert "read too slowly" in error["message"]
    # The request was stopped and is billed as a client that left early: a "client" cancel,
    # and its delivery confirmed (docs/billing.md).
    slow_uid = next(r.uid for r in scene.holder.received if r.session == "/slow")
    assert [c.reason for c in scene.cancels if c.uid == slow_uid] == ["client"]
    deliveries = scene.holder.relay.deliveries
    assert deliveries is not None and slow_uid in deliveries._pending


async def test_a_cut_client_that_never_reads_is_reset_after_the_grace(
    scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(streams, "CUT_FLUSH_GRACE", 0.5)
    before = cut_count()
    sock = await slow_client(scene, "anthropic")
    try:
        await held_until_cut(scene, before)
        transport = scene.slow["transport"]
        assert isinstance(transport, asyncio.Transport)
        assert transport.get_write_buffer_size() > 0  # what it did not read, for now
        await asyncio.sleep(1.0)
        # Reset: the bytes it never read are freed, the connection closed.
        assert transport.get_write_buffer_size() == 0
        assert transport.is_closing()
        assert scene.holder.relay.outlets.live == set()
    finally:
        sock.close()
