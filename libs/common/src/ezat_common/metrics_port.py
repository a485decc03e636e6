"""The metrics port of router, translator, billing and fetcher: ``/metrics``, ``/readyz`` and
``/healthz`` over HTTP/1.1, served on the service's own event loop with bounds (issue 26).

prometheus-client's server, which this replaces, started a thread per connection and never timed
one out: 200 idle connections were 200 threads, held for ever. Here a connection costs no
thread; at most ``max_connections`` are kept open (a new one beyond them is closed at once), and
a connection must send its request head within ``timeout`` seconds, counted from its opening or,
kept alive, from the end of the previous answer (so an idle kept-alive connection is closed after
it too). What the answer says is the caller's (``readiness.serve``).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
from collections.abc import Awaitable, Callable

from .config import split_listen
from .tasks import stop_task

log = logging.getLogger("ezat.metrics_port")

# A request head longer than this is not a scraper's or a probe's: the connection is closed.
MAX_HEAD = 8 * 1024
BIND_RETRY = 0.1  # seconds between attempts to bind a port a predecessor holds

# (path, Accept header) -> (status, content type, body)
Answer = Callable[[str, str | None], Awaitable[tuple[int, str, bytes]]]

_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"}
_REASONS |= {503: "Service Unavailable"}


def _listening(listen: str) -> socket.socket:
    host, port = split_listen(listen)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host, port), family=family, backlog=128)


class MetricsPort:
    """One listening port; ``open`` is the number of connections it holds now."""

    def __init__(self, answer: Answer, max_connections: int, timeout: float) -> None:
        self._answer = answer
        self._max = max_connections
        self._timeout = timeout
        self._held: set[asyncio.WriteTransport] = set()
        self._server: asyncio.Server | None = None
        self._binder: asyncio.Task[None] | None = None

    @property
    def open(self) -> int:
        """Connections held now."""
        return len(self._held)

    def bind(self, listen: str, wait_if_taken: bool = True) -> bool:
        """Listen on ``listen`` now (True), or, while a predecessor holds the port, from a
        task that binds it once free (False). Without ``wait_if_taken`` a port in use raises
        ``OSError`` (EADDRINUSE): no predecessor can be holding it."""
        try:
            sock = _listening(listen)
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE or not wait_if_taken:
                raise
            # A rolling restart's replacement takes work while its predecessor drains, and the
            # predecessor holds the port until it exits: bind it then, instead of crashing the
            # replacement (its own work does not need the port).
            log.info("metrics port %s in use (a predecessor draining?): bound once free", listen)
            self._binder = asyncio.get_running_loop().create_task(self._bind_when_free(listen))
            return False
        self._binder = asyncio.get_running_loop().create_task(self._serve(sock))
        return True

    async def _bind_when_free(self, listen: str) -> None:
        while True:
            await asyncio.sleep(BIND_RETRY)
            try:
                sock = _listening(listen)
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    continue
                log.error("metrics port could not be bound: %s", exc)
                return
            log.info("metrics port bound")
            await self._serve(sock)  # already in a task of its own
            return

    async def _serve(self, sock: socket.socket) -> None:
        self._server = await asyncio.start_server(self._connection, sock=sock, limit=MAX_HEAD)

    async def close(self) -> None:
        """Stop listening and drop the connections held (tests; a process just exits)."""
        await stop_task(self._binder)
        if self._server is not None:
            self._server.close()
            for transport in list(self._held):
                transport.abort()
            await self._server.wait_closed()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.open >= self._max:
            writer.transport.abort()  # beyond the bound: nothing read, nothing kept
            return
        transport = writer.transport
        self._held.add(transport)
        try:
            while await self._one(reader, writer):
                pass
        except (ConnectionError, TimeoutError):
            pass
        finally:
            self._held.discard(transport)
            transport.abort()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Read one request and answer it; whether the connection stays open for another."""
        try:
            async with asyncio.timeout(self._timeout):
                head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            return False  # closed, oversized or too slow: a scraper never is
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        headers = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            await self._write(writer, 400, "text/plain", b"bad request line\n", False)
            return False
        method, target, version = parts
        keep = version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
        if "content-length" in headers or "transfer-encoding" in headers:
            keep = False  # a body on a probe: not read, so the connection cannot be reused
        if method not in ("GET", "HEAD"):
            await self._write(writer, 405, "text/plain", b"GET only\n", False)
            return False
        path = target.split("?", 1)[0]
        status, content_type, body = await self._answer(path, headers.get("accept"))
        await self._write(writer, status, content_type, body, keep, method == "HEAD")
        return keep

    async def _write(
        self,
        writer: asyncio.StreamWriter,
        status: int,
        content_type: str,
        body: bytes,
        keep: bool,
        head_only: bool = False,
    ) -> None:
        head = (
            f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\n"
            f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
            f"Connection: {'keep-alive' if keep else 'close'}\r\n\r\n"
        )
        writer.write(head.encode("latin-1") + (b"" if head_only else body))
        async with asyncio.timeout(self._timeout):  # a reader that never reads is dropped
            await writer.drain()
