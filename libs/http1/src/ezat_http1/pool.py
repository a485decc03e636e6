"""Keep-alive HTTP/1.1 connections per origin: the client's entry point (``Pool.request``).

One request at a time per connection; idle connections are kept per origin (scheme, host, port)
and reused newest first, for at most ``keepalive`` seconds (less when the server's
``Keep-Alive: timeout=`` says so), and at most ``limit`` connections are open per origin (more
requests wait in line, within the caller's deadline). A connect that fails is ``ConnectFailed``;
what can go wrong after it is in ``response.py``.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque

from .connection import Connection
from .protocol import Origin
from .response import ConnectFailed, OnBody, Response

LIMIT_PER_ORIGIN = 1024  # open connections per origin, in use and idle


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

    async def request(
        self, origin: Origin, head: bytes, body: bytes, on_body: OnBody | None = None
    ) -> Response:
        """Send one request; returns once the response's head has arrived. Cancelling (a
        timeout included) aborts the connection. ``on_body``: see ``Response``."""
        conn = self._idle_connection(origin) or await self._acquire(origin)
        waiter = conn.send(head, body, on_body)
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
