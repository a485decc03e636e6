"""ezat_http1's client (pool, connection, response), against a raw TCP server that writes exact
bytes."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import subprocess
from pathlib import Path

import pytest
from ezat_http1 import (
    HIGH_WATER,
    BadResponse,
    ConnectFailed,
    Pool,
    ServerDisconnected,
)

from .servers import (
    OK,
    STREAM_HEAD,
    Handler,
    answer,
    held_stream,
    on_both_loops,
    post,
    read_request,
    serving,
)


async def bodies(
    pool: Pool, port: int, scheme: str = "http", times: int = 2, pause: float = 0.0
) -> list[bytes]:
    """POST ``times`` times, one after the other, reading each body to its end and releasing
    it (``pause`` seconds after each); the bodies."""
    out = []
    for _ in range(times):
        resp = await post(pool, port, scheme)
        out.append(await asyncio.wait_for(resp.read(), 2))
        assert resp.at_eof()
        resp.release()
        await asyncio.sleep(pause)
    return out


def watch_close(handler: Handler, gone: asyncio.Event) -> Handler:
    """``handler``, setting ``gone`` when the client's end of the connection closes."""

    async def watched(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        try:
            await handler(r, w)
            await r.read()  # EOF (or a reset) when the client closes
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass
        gone.set()

    return watched


@on_both_loops
async def test_a_connection_is_reused_after_a_response_read_to_its_end() -> None:
    async with serving(answer(OK, OK, OK)) as (server, port, pool):
        for _ in range(3):
            resp = await post(pool, port)
            assert (resp.status, await resp.read()) == (200, b"ok")
            resp.release()
        assert server.connections == 1


@on_both_loops
async def test_a_connection_the_deployment_closed_is_not_reused() -> None:
    async def one_then_close(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await read_request(r)
        w.write(OK)
        await w.drain()  # then the server closes the connection

    async with serving(one_then_close) as (server, port, pool):
        # The pause lets the close reach the client while the connection is idle.
        assert await bodies(pool, port, pause=0.05) == [b"ok"] * 2
        assert server.connections == 2


@on_both_loops
async def test_an_idle_connection_past_the_keepalive_is_not_reused() -> None:
    async with serving(answer(OK, OK), keepalive=0.05) as (server, port, pool):
        assert await bodies(pool, port, pause=0.1) == [b"ok"] * 2
        assert server.connections == 2


@on_both_loops
async def test_a_stream_is_read_as_it_arrives_and_its_end_is_an_empty_read() -> None:
    sent = asyncio.Event()

    async def stream(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await read_request(r)
        w.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n")
        await w.drain()
        await sent.wait()  # the second event only after the client saw the first
        w.write(b"6\r\nsecond\r\n0\r\n\r\n")
        await w.drain()
        await r.read()

    async with serving(stream) as (_, port, pool):
        resp = await post(pool, port)
        assert await asyncio.wait_for(resp.readany(), 2) == b"first"
        sent.set()
        assert await asyncio.wait_for(resp.readany(), 2) == b"second"
        assert await resp.readany() == b""
        assert resp.at_eof()


@on_both_loops
async def test_a_drop_mid_body_is_server_disconnected_after_what_arrived() -> None:
    async def drop(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await read_request(r)
        w.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial")
        await w.drain()

    async with serving(drop) as (_, port, pool):
        resp = await post(pool, port)
        assert await resp.readany() == b"partial"
        with pytest.raises(ServerDisconnected):
            await asyncio.wait_for(resp.readany(), 2)
        assert not resp.at_eof()


@on_both_loops
async def test_a_drop_before_the_head_fails_the_request() -> None:
    async def drop(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await read_request(r)

    async with serving(drop) as (_, port, pool):
        with pytest.raises(ServerDisconnected):
            await asyncio.wait_for(post(pool, port), 2)


@on_both_loops
async def test_bytes_that_are_not_http_fail_the_request() -> None:
    async with serving(answer(b"SSH-2.0-OpenSSH\r\n\r\n")) as (_, port, pool):
        with pytest.raises(BadResponse, match="bad status line"):
            await asyncio.wait_for(post(pool, port), 2)


@on_both_loops
async def test_nothing_listening_is_connect_failed() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    pool = Pool(connect_timeout=1, keepalive=30)
    with pytest.raises(ConnectFailed, match="no connection"):
        await post(pool, port)


@on_both_loops
async def test_closing_a_response_early_closes_the_connection_at_once() -> None:
    """How a deployment learns that the client went away: its connection closes."""
    eof = asyncio.Event()

    async def endless(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await read_request(r)
        w.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n")
        await w.drain()
        await r.read()  # returns at the client's close
        eof.set()

    async with serving(endless) as (server, port, pool):
        resp = await post(pool, port)
        assert await resp.readany() == b"abc"
        resp.release()  # not at its end: closed, not pooled
        await asyncio.wait_for(eof.wait(), 1)
        resp = await post(pool, port)  # a new connection
        assert server.connections == 2
        resp.close()


@on_both_loops
async def test_bytes_beyond_the_response_keep_the_connection_out_of_the_pool() -> None:
    async with serving(answer(OK + b"HTTP/1.1 200 OK\r\n", OK)) as (server, port, pool):
        assert await bodies(pool, port) == [b"ok"] * 2
        assert server.connections == 2


@on_both_loops
async def test_a_reader_that_falls_behind_stops_the_deployment_instead_of_buffering() -> None:
    """Reading pauses past HIGH_WATER: the deployment's writes back up, nothing is lost."""
    size = 128 * HIGH_WATER  # 32 MB: more than loopback's socket buffers hold
    backed_up = asyncio.Event()

    async def flood(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await read_request(r)
        w.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % size)
        w.write(b"x" * size)
        await asyncio.sleep(0.3)  # the client reads nothing meanwhile
        if w.transport.get_write_buffer_size() > 0:
            backed_up.set()
        await w.drain()
        await r.read()

    async with serving(flood) as (_, port, pool):
        resp = await post(pool, port)
        await asyncio.sleep(0.5)
        assert backed_up.is_set()
        assert len(await resp.read()) == size
        resp.release()


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1."""
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1"),
            *("-addext", "subjectAltName=IP:127.0.0.1"),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


@on_both_loops
async def test_https_checks_the_certificate_against_the_system_store(
    certificate: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, key = certificate
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key)
    async with serving(answer(OK, OK), tls) as (server, port, pool):
        # Not trusted: refused (a pool of its own: a pool reads the CA store on first use).
        with pytest.raises(ConnectFailed, match="CERTIFICATE_VERIFY_FAILED"):
            await post(Pool(connect_timeout=2, keepalive=30), port, "https")
        # Trusted through SSL_CERT_FILE, as an operator would add a private CA.
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        assert await bodies(pool, port, "https") == [b"ok"] * 2
        assert server.connections == 1  # one kept-alive connection (the refused one never was)


@on_both_loops
async def test_a_request_cancelled_before_its_head_aborts_the_connection() -> None:
    gone = asyncio.Event()

    async def silent(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await read_request(r)

    async with serving(watch_close(silent, gone)) as (server, port, pool):
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(post(pool, port), 0.2)
        await asyncio.wait_for(gone.wait(), 1)
        server.handler = answer(OK)
        resp = await post(pool, port)
        assert await resp.read() == b"ok"
        assert server.connections == 2


@on_both_loops
async def test_a_finished_stream_is_pooled_when_its_http_end_follows() -> None:
    async def late_end(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await read_request(r)
        w.write(STREAM_HEAD + b"4\r\nstop\r\n")
        await asyncio.sleep(0.2)  # the last chunk comes after the stream's last event
        w.write(b"0\r\n\r\n")
        await answer(OK)(r, w)

    async with serving(late_end) as (server, port, pool):
        resp = await post(pool, port)
        assert await resp.readany() == b"stop"
        resp.release_when_complete(1.0)
        resp.release()  # the owner's finally: no effect any more
        await asyncio.sleep(0.4)
        again = await post(pool, port)
        assert await again.read() == b"ok"
        assert server.connections == 1


@on_both_loops
async def test_a_finished_stream_whose_http_end_never_comes_is_closed() -> None:
    gone = asyncio.Event()

    async def no_end(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await read_request(r)
        w.write(STREAM_HEAD + b"4\r\nstop\r\n")

    async with serving(watch_close(no_end, gone)) as (server, port, pool):
        resp = await post(pool, port)
        assert await resp.readany() == b"stop"
        resp.release_when_complete(0.2)
        await asyncio.wait_for(gone.wait(), 1.5)
        server.handler = answer(OK)
        assert await (await post(pool, port)).read() == b"ok"
        assert server.connections == 2


@pytest.mark.parametrize(
    "reply",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
        b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\nKeep-Alive: timeout=1\r\nContent-Length: 2\r\n\r\nok",
    ],
    ids=["connection-close", "http-1.0", "keep-alive-timeout-1"],
)
@on_both_loops
async def test_responses_that_do_not_leave_a_reusable_connection_are_not_pooled(
    reply: bytes,
) -> None:
    async with serving(answer(reply, reply)) as (server, port, pool):
        assert await bodies(pool, port) == [b"ok"] * 2
        assert server.connections == 2


@on_both_loops
async def test_a_body_that_ends_with_the_connection_is_complete_and_not_pooled() -> None:
    async def until_close(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await read_request(r)
        w.write(b"HTTP/1.1 200 OK\r\n\r\nall of it")
        await w.drain()

    async with serving(until_close) as (server, port, pool):
        assert await bodies(pool, port) == [b"all of it"] * 2
        assert server.connections == 2


@on_both_loops
async def test_at_the_connection_limit_a_request_waits_for_a_free_one() -> None:
    go = asyncio.Event()
    async with serving(held_stream(go, then=answer(OK)), limit=1) as (server, port, pool):
        first = await post(pool, port)
        second = asyncio.create_task(post(pool, port))
        await asyncio.sleep(0.2)
        assert not second.done() and server.connections == 1
        go.set()
        assert await first.read() == b"a"
        first.release()
        resp = await asyncio.wait_for(second, 2)
        # The first connection, free again, was handed to the waiting request: no reconnect.
        assert await resp.read() == b"ok"
        assert server.connections == 1


@on_both_loops
async def test_connects_given_up_midway_do_not_raise_the_connection_limit() -> None:
    """A connect cancelled at any point (a deadline) gives its slot back exactly once."""
    go = asyncio.Event()
    async with serving(held_stream(go), limit=1) as (_, port, pool):
        for i in range(40):
            attempt = asyncio.create_task(post(pool, port))
            for _ in range(i % 8):  # cancelled before, during and after the connect
                await asyncio.sleep(0)
            attempt.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                (await attempt).close()
        await asyncio.sleep(0.2)  # every cancelled connection is gone by now
        first = await asyncio.wait_for(post(pool, port), 2)
        second = asyncio.create_task(post(pool, port))
        await asyncio.sleep(0.3)
        assert not second.done()  # still one connection at most
        second.cancel()
        go.set()
        first.close()


@on_both_loops
async def test_closing_a_tls_stream_early_closes_the_connection_at_once(
    certificate: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over TLS too, the deployment sees the client leave as soon as the router lets go."""
    cert, key = certificate
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key)
    gone = asyncio.Event()

    async def endless(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await read_request(r)
        w.write(STREAM_HEAD + b"3\r\nabc\r\n")
        await w.drain()

    async with serving(watch_close(endless, gone), tls) as (_, port, pool):
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        resp = await post(pool, port, "https")
        assert await resp.readany() == b"abc"
        resp.release()
        await asyncio.wait_for(gone.wait(), 1)


@on_both_loops
async def test_https_checks_the_host_name(
    certificate: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, key = certificate  # issued for 127.0.0.1 only
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key)
    async with serving(answer(OK), tls) as (_, port, pool):
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        with pytest.raises(ConnectFailed, match="CERTIFICATE_VERIFY_FAILED"):
            await post(pool, port, "https", host="localhost")


@on_both_loops
async def test_the_sweep_closes_idle_connections_past_their_keepalive() -> None:
    """Without waiting for the next request: the deployment's connection is let go."""
    gone = asyncio.Event()
    async with serving(watch_close(answer(OK), gone), keepalive=0.1) as (_, port, pool):
        resp = await post(pool, port)
        assert await resp.read() == b"ok"
        resp.release()  # idle now
        pool.sweep()
        await asyncio.sleep(0.2)
        assert not gone.is_set()  # not yet: inside its keep-alive when swept
        pool.sweep()
        await asyncio.wait_for(gone.wait(), 1)
