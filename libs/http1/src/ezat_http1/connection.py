"""One keep-alive HTTP/1.1 client connection, as an ``asyncio.Protocol``.

One request at a time. Bytes are parsed in ``data_received`` (``protocol.ResponseParser``) and
pushed to the ``Response`` at once. Closing a response before its end aborts the connection (no
TLS close handshake to wait for), which is how a server learns at once that the client went
away. A connection that may carry another request goes back to its ``Pool``.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from .protocol import Origin, ProtocolError, ResponseParser, idle_seconds
from .response import BadResponse, OnBody, Response, ServerDisconnected, UpstreamError

if TYPE_CHECKING:
    from .pool import Pool


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

    def send(
        self, head: bytes, body: bytes, on_body: OnBody | None = None
    ) -> asyncio.Future[Response]:
        assert self.transport is not None and self.response is None, "one request at a time"
        self.parser.reset()
        self.response = Response(self, on_body)
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
