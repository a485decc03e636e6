"""The load generator's HTTP/1.1 client: one keep-alive connection per worker, a pre-encoded
request, and a response parser that runs in the protocol's ``data_received``.

Why not aiohttp's client: at c=256 it spent 0.41 ms of CPU per 20-token stream and 0.19 ms per
JSON reply (request object, header multidict, stream reader, one ``iter_any`` step per read), as
much as the gateway's router, on the same two cores the gateway is measured on. The load
generator's own cost is not the system's; this client reads a stream with a few slices and
``bytes.find`` per read and spends about a quarter of that (docs/performance.md).

Nothing is skipped for speed: the status line and headers are parsed, ``Content-Length`` and
``chunked`` bodies are decoded exactly (chunk sizes, CRLFs, the last chunk and trailers), and a
response that ends early, or a connection that closes mid-response, is an error.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from urllib.parse import urlsplit

_HEAD_END = b"\r\n\r\n"
_CRLF = b"\r\n"
MAX_HEAD = 65536
_HEX = re.compile(rb"[0-9A-Fa-f]{1,15}")

# Parser states.
_HEAD, _LENGTH, _SIZE, _DATA, _DATA_END, _TRAILER, _DONE = range(7)


class ProtocolError(Exception):
    """The server's bytes are not a valid HTTP/1.1 response."""


class ServerDisconnected(Exception):
    """The connection closed before the response was complete."""


def encode_request(url: str, headers: dict[str, str], body: bytes) -> tuple[str, int, bytes]:
    """``(host, port, bytes)`` of a POST to ``url`` (http only: the bench runs on loopback)."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"the load generator speaks plain http to a host: {url!r}")
    port = parts.port or 80
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    lines = [f"POST {path} HTTP/1.1", f"Host: {parts.hostname}:{port}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    lines.append(f"Content-Length: {len(body)}")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return parts.hostname, port, head + body


class Response:
    """One response as it arrives: ``on_body`` sees each decoded piece of the body (for a stream,
    at the time it is read); ``done`` resolves with the status when the body is complete, and
    ``ended`` is that moment (``perf_counter_ns``, taken in the same callback as a stream's
    first-token time, so both exclude the wait for the worker task to resume)."""

    __slots__ = ("body", "done", "ended", "keep", "on_body", "status")

    def __init__(self, done: asyncio.Future[int], on_body: Callable[[bytes], None] | None) -> None:
        self.done = done
        self.on_body = on_body
        self.status = 0
        self.ended = 0
        self.keep = True  # the server keeps the connection open after this response
        self.body = bytearray()  # only when there is no on_body (a whole reply, or an error)


class Connection(asyncio.Protocol):
    """A client connection that carries one request at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._buf = bytearray()
        self._state = _DONE
        self._need = 0
        self._resp: Response | None = None

    # -- asyncio.Protocol --------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not a subclass

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        resp, self._resp = self._resp, None
        if resp is not None and not resp.done.done():
            resp.done.set_exception(ServerDisconnected("connection closed mid-response"))

    def data_received(self, data: bytes) -> None:
        resp = self._resp
        if resp is None:
            # Bytes nobody asked for: they would be read as the next response's head.
            self.close()
            return
        self._buf += data
        try:
            self._parse(resp)
        except (ProtocolError, ValueError) as exc:
            self._resp = None
            if self.transport is not None:
                self.transport.close()
            if not resp.done.done():
                resp.done.set_exception(ProtocolError(str(exc)))

    # -- requests ----------------------------------------------------------------------------

    @property
    def usable(self) -> bool:
        return self.transport is not None and not self.transport.is_closing()

    def send(self, request: bytes, on_body: Callable[[bytes], None] | None = None) -> Response:
        """Write ``request``; the response's ``done`` resolves with the status once its body is
        complete (or with ``ServerDisconnected`` / ``ProtocolError``)."""
        assert self.transport is not None and self._resp is None, "one request at a time"
        resp = Response(asyncio.get_running_loop().create_future(), on_body)
        self._resp = resp
        self._buf.clear()
        self._state = _HEAD
        self.transport.write(request)
        return resp

    def close(self) -> None:
        self._resp = None
        if self.transport is not None:
            self.transport.close()

    # -- the parser --------------------------------------------------------------------------

    def _parse(self, resp: Response) -> None:
        buf = self._buf
        while True:
            state = self._state
            if state == _HEAD:
                end = buf.find(_HEAD_END)
                if end < 0:
                    if len(buf) > MAX_HEAD:
                        raise ProtocolError("response head over 64 KiB")
                    return
                self._head(resp, bytes(buf[:end]))
                del buf[: end + 4]
                if self._state == _DONE:  # a response without a body (204, 304)
                    self._finish(resp)
                    return
            elif state == _LENGTH:
                take = min(self._need, len(buf))
                if take:
                    self._body(resp, bytes(buf[:take]))
                    del buf[:take]
                    self._need -= take
                if self._need:
                    return
                self._finish(resp)
                return
            elif state == _SIZE:
                end = buf.find(_CRLF)
                if end < 0:
                    return
                digits = bytes(buf[:end]).split(b";", 1)[0].strip()
                if not _HEX.fullmatch(digits):
                    raise ProtocolError(f"bad chunk size {digits[:20]!r}")
                size = int(digits, 16)
                del buf[: end + 2]
                if size:
                    self._need, self._state = size, _DATA
                else:
                    self._state = _TRAILER
            elif state == _DATA:
                take = min(self._need, len(buf))
                if not take:
                    return
                self._body(resp, bytes(buf[:take]))
                del buf[:take]
                self._need -= take
                if self._need:
                    return
                self._state = _DATA_END
            elif state == _DATA_END:
                if len(buf) < 2:
                    return
                if buf[:2] != _CRLF:
                    raise ProtocolError("chunk data not followed by CRLF")
                del buf[:2]
                self._state = _SIZE
            elif state == _TRAILER:
                end = buf.find(_CRLF)
                if end < 0:
                    return
                del buf[: end + 2]
                if end == 0:  # the empty line after the last chunk (and any trailers)
                    self._finish(resp)
                    return
            else:
                return

    def _head(self, resp: Response, head: bytes) -> None:
        lines = head.split(b"\r\n")
        status_line = lines[0].split(b" ", 2)
        if len(status_line) < 2 or not status_line[0].startswith(b"HTTP/1."):
            raise ProtocolError(f"bad status line {lines[0][:80]!r}")
        if not status_line[1].isdigit():
            raise ProtocolError(f"bad status line {lines[0][:80]!r}")
        status = int(status_line[1])
        if 100 <= status < 200:
            return  # an interim response: the real one follows (state stays _HEAD)
        resp.status = status
        length = -1
        chunked = False
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            if not sep:
                raise ProtocolError(f"bad header line {line[:80]!r}")
            name = name.strip().lower()
            if name == b"content-length":
                if not value.strip().isdigit():
                    raise ProtocolError(f"bad Content-Length {value[:20]!r}")
                length = int(value)
            elif name == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
            elif name == b"connection":
                resp.keep = b"close" not in value.lower()
        if status_line[0] == b"HTTP/1.0":
            resp.keep = False
        if status in (204, 304):
            self._state = _DONE
        elif chunked:
            self._state = _SIZE
        elif length >= 0:
            self._need, self._state = length, _LENGTH
        else:
            raise ProtocolError("a response without Content-Length or chunked encoding")

    def _body(self, resp: Response, piece: bytes) -> None:
        if resp.on_body is not None and resp.status < 300:
            resp.on_body(piece)
        else:
            resp.body += piece

    def _finish(self, resp: Response) -> None:
        resp.ended = time.perf_counter_ns()
        self._state = _DONE
        self._resp = None
        if (not resp.keep or self._buf) and self.transport is not None:
            self.transport.close()  # closing, or bytes beyond the response: not reusable
        if not resp.done.done():
            resp.done.set_result(resp.status)


async def connect(host: str, port: int) -> Connection:
    _, conn = await asyncio.get_running_loop().create_connection(Connection, host, port)
    return conn
