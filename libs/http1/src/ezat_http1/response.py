"""A response as the client hands it over, and the client's failures.

The head has arrived; the body is read with ``readany`` (everything that arrived since the last
read, never waiting for more: a stream's events are never split or held back) or handed to an
``on_body`` callback as it is read. Reading pauses while more than ``HIGH_WATER`` bytes wait for
the reader, so a slow consumer cannot make the client buffer a server's output.

Failures are ``UpstreamError``: ``ConnectFailed`` (no connection), ``ServerDisconnected`` (the
connection closed before the response was complete), ``BadResponse`` (not HTTP/1.1).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .connection import Connection

HIGH_WATER = 256 * 1024
STREAM_END_GRACE = 1.0  # after a stream's last event, how long its HTTP end may take to come

OnBody = Callable[[bytes], None]


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

    With ``on_body``, each piece of the body goes to it as it is read, and ``b""`` once the body
    is complete, instead of to ``readany`` (which then only waits for the end, or raises);
    ``on_body`` must not raise.
    """

    __slots__ = (
        "_conn",
        "_eof",
        "_error",
        "_on_body",
        "_parts",
        "_released",
        "_size",
        "_waiter",
        "headers",
        "status",
    )

    def __init__(self, conn: Connection, on_body: OnBody | None = None) -> None:
        self._conn = conn
        self._on_body = on_body
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
        if self._on_body is not None:
            self._on_body(data)
            return
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
            if self._on_body is not None:
                self._on_body(b"")
        else:
            self._error = error
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
