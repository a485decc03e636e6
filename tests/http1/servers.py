"""A raw TCP server that writes exact bytes, and a pool to call it with: what the client tests
(test_client.py, test_response.py) run against, on both event loops."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
import uvloop
from ezat_http1 import LIMIT_PER_ORIGIN, Pool, Response, request_head, request_prefix

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def on_both_loops(test: Callable[..., Awaitable[None]]) -> Callable[..., None]:
    """A sync test that runs ``test`` on a fresh loop of each kind: uvloop (what the services
    run on) and asyncio's own."""

    def run(loop_kind: str, **fixtures: object) -> None:  # pytest passes all by name
        factory = uvloop.new_event_loop if loop_kind == "uvloop" else asyncio.new_event_loop
        with asyncio.Runner(loop_factory=factory) as runner:
            runner.run(test(**fixtures))  # type: ignore[arg-type]

    params = list(inspect.signature(test).parameters.values())
    loop_kind = inspect.Parameter("loop_kind", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    run.__signature__ = inspect.Signature([loop_kind, *params])  # type: ignore[attr-defined]
    run.__name__ = test.__name__
    run.__doc__ = test.__doc__
    run.pytestmark = getattr(test, "pytestmark", [])  # type: ignore[attr-defined]
    return pytest.mark.parametrize("loop_kind", ["uvloop", "asyncio"])(run)


OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


class Server:
    """Counts connections; ``handler`` serves each one."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.connections = 0
        self.closed = asyncio.Event()  # set when a client closes its end

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            await self.handler(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


@contextlib.asynccontextmanager
async def serving(
    handler: Handler,
    tls: ssl.SSLContext | None = None,
    keepalive: float = 30.0,
    limit: int = LIMIT_PER_ORIGIN,
) -> AsyncIterator[tuple[Server, int, Pool]]:
    """A server for ``handler`` on a free port, and a pool to call it with (closed after)."""
    server = Server(handler)
    srv = await asyncio.start_server(server.serve, "127.0.0.1", 0, ssl=tls)
    port = srv.sockets[0].getsockname()[1]
    pool = Pool(connect_timeout=2, keepalive=keepalive, limit=limit)
    try:
        yield server, port, pool
    finally:
        srv.close()


async def read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    return head + await reader.readexactly(length)


def answer(*replies: bytes) -> Handler:
    """Answer each request on a connection with the next reply, then keep the connection."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for reply in replies:
            await read_request(reader)
            writer.write(reply)
            await writer.drain()
        await reader.read()  # until the client closes

    return handler


HEAD = request_head(request_prefix("/v1/messages", "127.0.0.1", {}), {}, 2)


async def post(pool: Pool, port: int, scheme: str = "http", host: str = "127.0.0.1") -> Response:
    return await pool.request((scheme, host, port), HEAD, b"{}")


STREAM_HEAD = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"


def held_stream(go: asyncio.Event, then: Handler | None = None) -> Handler:
    """A stream of one event ("a") whose end waits for ``go``; then ``then`` serves the
    connection's next requests (else it is kept until the client closes it)."""

    async def handler(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await read_request(r)
        w.write(STREAM_HEAD + b"1\r\na\r\n")
        await go.wait()
        w.write(b"0\r\n\r\n")
        await (then(r, w) if then is not None else r.read())

    return handler
