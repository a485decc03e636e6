"""Keep-alive HTTP/1.1 connections to the deployments: the router's upstream client.

One request at a time per connection; idle connections are kept per origin (scheme, host, port)
and reused newest first, for at most ``keepalive`` seconds (less when the deployment's
``Keep-Alive: timeout=`` says so), and at most ``limit`` connections are open per origin (more
requests wait in line, within the caller's deadline). Bytes are parsed in the protocol's
``data_received`` (``core.http1``); a reader gets everything that arrived since its last read,
never waiting for more: a stream's events are never split or held back. Reading pauses while
more than ``HIGH_WATER`` bytes wait for the reader, so a slow consumer cannot make the router
buffer a deployment's output.

Failures are ``UpstreamError``: ``ConnectFailed`` (no connection), ``ServerDisconnected`` (the
connection closed before the response was complete), ``BadResponse`` (not HTTP/1.1). Closing a
response before its end aborts its connection (no TLS close handshake to wait for), which is how
a deployment learns at once that the client went away.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque

from .core.http1 import ProtocolError, ResponseParser, idle_seconds

HIGH_WATER = 256 * 1024
LIMIT_PER_ORIGIN = 1024  # open connections per origin, in use and idle
STREAM_END_GRACE = 1.0  # after a stream's last event, how long its HTTP end may take to come

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

    Then exactly one of: ``release()`` (pooled if read to its end, else aborted), ``close()``
    (aborted), ``release_when_complete()`` (pooled once the body's end arrives); later calls
    are no-ops, so an owner may release in a ``finally`` whatever happened before.
    """

    __slots__ = (
        "_conn",
        "_eof",
        "_error",
        "_parts",
        "_released",
        "_size",
        "_waiter",
        "headers",
        "status",
    )

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self.status = 0
        self.headers: dict[str, str] = {}
        self._parts: list[bytes] = []
        self._size = 0
        self._eof = False
        self._error: UpstreamError | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._released = False

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
        """Back to the pool if the body was read to its end, else abort the connection."""
        if self._released:
            return
        self._released = True
        if self.at_eof():
            self._conn.done(self)
        else:
            self._conn.close()

    def release_when_complete(self, within: float = STREAM_END_GRACE) -> None:
        """For a body whose content is complete by its own protocol (a stream after
        ``message_stop``) while its HTTP end (the last chunk) may still be on its way: the
        connection goes back to the pool when that end arrives within ``within`` seconds, else
        it is closed. Saves a new connection (and TLS handshake) per stream."""
        if self._released:
            return
        self._released = True
        if self.at_eof():
            self._conn.done(self)
        elif self._error is None and self._conn.usable:
            self._parts.clear()  # nothing more is read from it: drop what arrives meanwhile
            self._conn.drain(self, within)
        else:
            self._conn.close()

    def close(self) -> None:
        if not self._released:
            self._released = True
            self._conn.close()

    # -- fed by the connection ---------------------------------------------------------------

    def _push(self, data: bytes) -> None:
        if self._released:
            return  # draining: the owner reads no more
        self._parts.append(data)
        self._size += len(data)
        if self._size > HIGH_WATER:
            self._conn.pause()
        self._wake()

    def _end(self, error: UpstreamError | None) -> None:
        if self._eof or self._error is not None:
            return  # the first outcome stands
        if error is None:
            self._eof = True
        else:
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
        self.keepalive = pool.keepalive
        self._paused = False
        self._drain: asyncio.TimerHandle | None = None
        self.owns_slot = False  # set once made: its origin's slot is freed when it is lost

    @property
    def usable(self) -> bool:
        return self.transport is not None and not self.transport.is_closing()

    def reusable(self, now: float) -> bool:
        """Idle, open, and inside its keep-alive."""
        return self.usable and now - self.idle_since < self.keepalive

    def send(self, head: bytes, body: bytes) -> asyncio.Future[Response]:
        assert self.transport is not None and self.response is None, "one request at a time"
        self.parser.reset()
        self.response = Response(self)
        self.head = self.loop.create_future()
        self.transport.writelines((head, body))
        return self.head

    def close(self) -> None:
        """Close; a response still under way is aborted (its reader, if any, is told)."""
        resp, self.response = self.response, None
        self._stop_drain()
        transport, self.transport = self.transport, None
        if transport is not None:
            if resp is None:
                transport.close()
            else:
                # Mid-response: no FIN after buffered writes, no TLS close_notify exchange.
                transport.abort()
        if resp is not None:  # a reader still waiting must not wait forever
            self._fail(resp, ServerDisconnected("the connection was closed"))

    def done(self, response: Response) -> None:
        """The response was read to its end: keep the connection if it can carry another."""
        if self.response is not response:
            return
        self.response = None
        self._stop_drain()
        head = self.parser.head
        transport = self.transport
        if (
            head is not None
            and head.keep_alive
            and not self.parser.leftover
            and transport is not None
            and not transport.is_closing()
            and not transport.get_write_buffer_size()  # the whole request went out
        ):
            self.keepalive = idle_seconds(head.headers.get("keep-alive"), self.pool.keepalive)
            self.pool.put(self)
        else:
            self.close()

    def drain(self, response: Response, within: float) -> None:
        self.resume()
        self._drain = self.loop.call_later(within, self.close)
        if self.parser.done:
            self.done(response)

    def pause(self) -> None:
        if not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()

    def resume(self) -> None:
        if self._paused and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()

    def _stop_drain(self) -> None:
        if self._drain is not None:
            self._drain.cancel()
            self._drain = None

    # -- asyncio.Protocol --------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not a subclass

    def connection_lost(self, exc: Exception | None) -> None:
        if self.owns_slot:
            self.owns_slot = False
            self.pool.lost(self.origin)
        self.transport = None
        self._stop_drain()
        resp, self.response = self.response, None
        if resp is None:
            return
        try:
            if exc is not None:
                # A reset is not the end of a read-until-close body.
                raise ProtocolError(str(exc))
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
        except Exception as exc:  # ProtocolError, or a parser bug: never into the event loop
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
            if self._drain is not None:
                self.done(resp)

    def _fail(self, resp: Response, error: UpstreamError) -> None:
        head = self.head
        if head is not None and not head.done():
            head.set_exception(error)
        resp._end(error)


class Pool:
    """Connections per origin; a connection is either idle here or carrying one request.

    Each origin has ``limit`` slots. A slot belongs to the request connecting with it, then to
    the connection it made (freed in ``connection_lost``); a request that finds none waits in
    line, and is handed either a connection that just finished (no reconnect) or a freed slot.
    """

    def __init__(
        self, connect_timeout: float, keepalive: float, limit: int = LIMIT_PER_ORIGIN
    ) -> None:
        self.keepalive = keepalive
        self._connect_timeout = connect_timeout
        self._limit = limit
        self._idle: dict[Origin, deque[Connection]] = {}
        self._open: dict[Origin, int] = {}  # slots taken: connections and connects under way
        # In line for a slot: resolved with a connection to reuse, or None (connect with it).
        self._waiting: dict[Origin, deque[asyncio.Future[Connection | None]]] = {}
        self._tls: ssl.SSLContext | None = None  # made on first use (reads the CA store)
        self._closed = False

    async def request(self, origin: Origin, head: bytes, body: bytes) -> Response:
        """Send one request; returns once the response's head has arrived. Cancelling (a
        timeout included) aborts the connection."""
        conn = self._idle_connection(origin) or await self._acquire(origin)
        waiter = conn.send(head, body)
        try:
            return await waiter
        except BaseException:
            conn.close()
            raise

    def put(self, conn: Connection) -> None:
        """A connection that can carry another request: to the first in line, else idle."""
        if self._closed:
            conn.close()
        elif not self._hand_over(conn.origin, conn):
            conn.idle_since = conn.loop.time()
            self._idle.setdefault(conn.origin, deque()).append(conn)

    def lost(self, origin: Origin) -> None:
        """A connection of ``origin`` is gone: its slot goes to the first in line, or is free."""
        if not self._hand_over(origin, None):
            self._open[origin] -= 1

    def _hand_over(self, origin: Origin, conn: Connection | None) -> bool:
        """Give ``conn`` (or, for None, a slot) to the first request still in line, if any."""
        waiting = self._waiting.get(origin)
        while waiting:
            turn = waiting.popleft()
            if not turn.done():
                turn.set_result(conn)
                return True
        return False

    def sweep(self) -> None:
        """Close idle connections past their keep-alive or closed by the deployment."""
        now = asyncio.get_running_loop().time()
        for idle in self._idle.values():
            expired = [c for c in idle if not c.reusable(now)]
            for conn in expired:
                idle.remove(conn)
                conn.close()

    def close(self) -> None:
        self._closed = True
        for idle in self._idle.values():
            while idle:
                idle.pop().close()

    def _idle_connection(self, origin: Origin) -> Connection | None:
        idle = self._idle.get(origin)
        while idle:
            conn = idle.pop()  # newest first: the likeliest to be alive
            if conn.reusable(conn.loop.time()):
                return conn
            conn.close()
        return None

    async def _acquire(self, origin: Origin) -> Connection:
        """A connection made with a free slot; at the limit, the first one handed over."""
        taken = self._open.get(origin, 0)
        if taken < self._limit:
            self._open[origin] = taken + 1
            return await self._connect(origin)
        turn: asyncio.Future[Connection | None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(origin, deque()).append(turn)
        try:
            conn = await turn  # the caller's deadline bounds the wait
        except BaseException:
            if turn.done() and not turn.cancelled():  # handed over just as we gave up
                handed = turn.result()
                if handed is None:
                    self.lost(origin)
                else:
                    self.put(handed)
            raise
        return conn if conn is not None else await self._connect(origin)

    async def _connect(self, origin: Origin) -> Connection:
        """Connect with a slot the caller holds; the connection owns it once made."""
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
        except BaseException as exc:
            self.lost(origin)  # no connection took the slot
            if isinstance(exc, TimeoutError):
                raise ConnectFailed(f"no connection to {host}:{port} within the timeout") from None
            if isinstance(exc, OSError):  # refused, unreachable, DNS (gaierror), TLS (SSLError)
                raise ConnectFailed(f"no connection to {host}:{port}: {exc}") from None
            raise
        if not conn.usable:  # closed already (e.g. bytes before any request)
            self.lost(origin)
            raise ConnectFailed(f"the connection to {host}:{port} closed at once")
        conn.owns_slot = True
        return conn

    def _context(self) -> ssl.SSLContext:
        if self._tls is None:
            # The system's CA store (or SSL_CERT_FILE / SSL_CERT_DIR), verification on.
            self._tls = ssl.create_default_context()
        return self._tls
