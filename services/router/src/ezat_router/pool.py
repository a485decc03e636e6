"""Keep-alive HTTP/1.1 connections to the deployments: the router's upstream client.

One request at a time per connection; idle connections are kept per origin (scheme, host, port)
and reused newest first, for at most ``keepalive`` seconds. Bytes are parsed in the protocol's
``data_received`` (``core.http1``) and handed to the reader as whole reads: a stream's events are
never split or held back. Reading pauses while more than ``HIGH_WATER`` bytes wait for the
reader, so a slow consumer cannot make the router buffer a deployment's output.

Failures are ``UpstreamError``: ``ConnectFailed`` (no connection), ``ServerDisconnected`` (the
connection closed before the response was complete), ``BadResponse`` (not HTTP/1.1). Closing a
response before its end closes its connection, which is how a deployment learns that the client
went away.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque

from .core.http1 import ProtocolError, ResponseParser

HIGH_WATER = 256 * 1024
MAX_IDLE_PER_ORIGIN = 1024

Origin = tuple[str, str, int]  # scheme, host, port


class UpstreamError(Exception):
    """The exchange with the deployment failed; ``str()`` says how."""


class ConnectFailed(UpstreamError):
    """No connection could be made (refused, unreachable, DNS, TLS, connect timeout)."""


class ServerDisconnected(UpstreamError):
    """The connection closed before the response was complete."""


class BadResponse(UpstreamError):
    """The deployment's bytes are not a valid HTTP/1.1 response."""


class Response:
    """A response whose head has arrived; its body is read with ``readany`` / ``read``.

    ``release()`` gives a fully read connection back to the pool; ``close()`` drops it.
    """

    __slots__ = ("_conn", "_eof", "_error", "_parts", "_size", "_waiter", "headers", "status")

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self.status = 0
        self.headers: dict[str, str] = {}
        self._parts: list[bytes] = []
        self._size = 0
        self._eof = False
        self._error: UpstreamError | None = None
        self._waiter: asyncio.Future[None] | None = None

    async def readany(self) -> bytes:
        """Everything that has arrived since the last read, waiting for something if nothing
        has; ``b""`` at the end of the body. Raises ``UpstreamError`` if the connection broke."""
        while not self._parts:
            if self._error is not None:
                raise self._error
            if self._eof:
                return b""
            self._waiter = waiter = self._conn.loop.create_future()
            try:
                await waiter
            finally:
                self._waiter = None
        parts = self._parts
        data = parts[0] if len(parts) == 1 else b"".join(parts)
        parts.clear()
        if self._size > HIGH_WATER:
            self._conn.resume()
        self._size = 0
        return data

    async def read(self) -> bytes:
        """The whole body."""
        pieces = []
        while data := await self.readany():
            pieces.append(data)
        return b"".join(pieces)

    def at_eof(self) -> bool:
        """The body was read to its end."""
        return self._eof and not self._parts and self._error is None

    def release(self) -> None:
        """Back to the pool if the body was read to its end, else close the connection."""
        if self.at_eof():
            self._conn.done(self)
        else:
            self._conn.close()

    def close(self) -> None:
        self._conn.close()

    # -- fed by the connection ---------------------------------------------------------------

    def _push(self, data: bytes) -> None:
        self._parts.append(data)
        self._size += len(data)
        if self._size > HIGH_WATER:
            self._conn.pause()
        self._wake()

    def _end(self, error: UpstreamError | None) -> None:
        if error is None:
            self._eof = True
        elif not self._eof:
            self._error = error
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


class Connection(asyncio.Protocol):
    """One HTTP/1.1 connection; ``send`` starts a request, ``head`` resolves with its response."""

    def __init__(self, pool: Pool, origin: Origin) -> None:
        self.pool = pool
        self.origin = origin
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.parser = ResponseParser()
        self.response: Response | None = None
        self.head: asyncio.Future[Response] | None = None
        self.idle_since = 0.0
        self._paused = False

    @property
    def usable(self) -> bool:
        return self.transport is not None and not self.transport.is_closing()

    def send(self, head: bytes, body: bytes) -> asyncio.Future[Response]:
        assert self.transport is not None and self.response is None, "one request at a time"
        self.parser.reset()
        self.response = Response(self)
        self.head = self.loop.create_future()
        self.transport.writelines((head, body))
        return self.head

    def close(self) -> None:
        resp, self.response = self.response, None
        if self.transport is not None:
            self.transport.close()
            self.transport = None
        if resp is not None:  # a reader still waiting must not wait forever
            self._fail(resp, ServerDisconnected("the connection was closed"))

    def done(self, response: Response) -> None:
        """The response was read to its end: keep the connection if it can carry another."""
        if self.response is not response:
            return
        self.response = None
        head = self.parser.head
        if head is not None and head.keep_alive and not self.parser.leftover and self.usable:
            self.pool.put(self)
        else:
            self.close()

    def pause(self) -> None:
        if not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()

    def resume(self) -> None:
        if self._paused and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()

    # -- asyncio.Protocol --------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not a subclass

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        resp, self.response = self.response, None
        if resp is None:
            return
        try:
            tail = self.parser.feed_eof()
        except ProtocolError:
            closed = ServerDisconnected("the deployment closed the connection mid-response")
            self._fail(resp, closed)
            return
        if tail:
            resp._push(tail)
        self._arrived(resp)

    def data_received(self, data: bytes) -> None:
        resp = self.response
        if resp is None:
            self.close()  # bytes nobody asked for would be read as the next response
            return
        try:
            body = self.parser.feed(data)
        except ProtocolError as exc:
            self._fail(resp, BadResponse(str(exc)))
            self.close()
            return
        if body:
            resp._push(body)
        self._arrived(resp)

    def _arrived(self, resp: Response) -> None:
        parser = self.parser
        head = self.head
        if head is not None and parser.head is not None and not head.done():
            resp.status = parser.head.status
            resp.headers = parser.head.headers
            head.set_result(resp)
        if parser.done:
            resp._end(None)

    def _fail(self, resp: Response, error: UpstreamError) -> None:
        head = self.head
        if head is not None and not head.done():
            head.set_exception(error)
        resp._end(error)


class Pool:
    """Connections per origin; a connection is either idle here or carrying one request."""

    def __init__(self, connect_timeout: float, keepalive: float) -> None:
        self._connect_timeout = connect_timeout
        self._keepalive = keepalive
        self._idle: dict[Origin, deque[Connection]] = {}
        self._tls: ssl.SSLContext | None = None  # made on first use (reads the CA store)
        self._closed = False

    async def request(self, origin: Origin, head: bytes, body: bytes) -> Response:
        """Send one request; returns once the response's head has arrived. Cancelling (a
        timeout included) closes the connection."""
        conn = self._idle_connection(origin) or await self._connect(origin)
        waiter = conn.send(head, body)
        try:
            return await waiter
        except BaseException:
            conn.close()
            raise

    def put(self, conn: Connection) -> None:
        idle = self._idle.setdefault(conn.origin, deque())
        now = conn.loop.time()
        # The oldest ones are reused last: drop those the deployment closed or that expired.
        while idle and (not idle[0].usable or idle[0].idle_since < now - self._keepalive):
            idle.popleft().close()
        if self._closed or len(idle) >= MAX_IDLE_PER_ORIGIN:
            conn.close()
            return
        conn.idle_since = now
        idle.append(conn)

    def close(self) -> None:
        self._closed = True
        for idle in self._idle.values():
            while idle:
                idle.pop().close()

    def _idle_connection(self, origin: Origin) -> Connection | None:
        idle = self._idle.get(origin)
        if not idle:
            return None
        oldest_allowed = idle[-1].loop.time() - self._keepalive
        while idle:
            conn = idle.pop()  # newest first: the likeliest to be alive
            if conn.usable and conn.idle_since > oldest_allowed:
                # Older ones are closed as they come up; the rest are newer than this one.
                return conn
            conn.close()
        return None

    async def _connect(self, origin: Origin) -> Connection:
        scheme, host, port = origin
        loop = asyncio.get_running_loop()
        tls = self._context() if scheme == "https" else None
        try:
            async with asyncio.timeout(self._connect_timeout):
                _, conn = await loop.create_connection(
                    lambda: Connection(self, origin),
                    host,
                    port,
                    ssl=tls,
                    server_hostname=host if tls is not None else None,
                )
        except TimeoutError:
            raise ConnectFailed(f"no connection to {host}:{port} within the timeout") from None
        except OSError as exc:  # refused, unreachable, DNS (gaierror), TLS (SSLError)
            raise ConnectFailed(f"no connection to {host}:{port}: {exc}") from None
        return conn

    def _context(self) -> ssl.SSLContext:
        if self._tls is None:
            # The system's CA store (SSL_CERT_FILE / SSL_CERT_DIR are honoured), verification on.
            self._tls = ssl.create_default_context()
        return self._tls
