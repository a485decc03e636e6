"""HTTP/1.1 for the client, without I/O: addresses, request heads, and the response parser.

The router speaks to deployments, and the load generator to the gateway, with this package's
small client (``ezat_http1.client``) rather than aiohttp's, which was the largest item in the
router's profile and cost the load generator as much CPU as the router (docs/performance.md).
What that client needs from the protocol lives here, as plain functions on bytes, tested on
their own:

- ``address``: a URL's origin (what a connection is pooled by), ``Host`` header and path.
- ``request_prefix`` / ``request_head``: one POST's head, from a pre-encoded per-target prefix;
  ``post_head``: the whole head of a POST to a URL, for a caller that sends the same one again
  and again.
- ``idle_seconds``: how long a kept-alive connection may wait, given ``Keep-Alive: timeout=``.
- ``ResponseParser``: fed the bytes as they arrive, it returns the decoded body bytes of each
  read and sets ``head`` once the status line and headers are complete. It decodes
  ``Content-Length``, ``chunked`` (sizes, extensions, CRLFs, trailers) and read-until-close
  bodies exactly, and ``gzip``/``deflate`` content codings; anything else is a ``ProtocolError``.
"""

from __future__ import annotations

import re
import zlib
from urllib.parse import urlsplit

MAX_HEAD = 65536  # status line and headers together
MAX_LINE = 4096  # a chunk-size or trailer line
_HEAD_END = b"\r\n\r\n"
_CRLF = b"\r\n"
_HEX = re.compile(rb"[0-9A-Fa-f]{1,15}")
_DIGITS = re.compile(r"[0-9]{1,18}")  # ASCII only: str.isdigit() also takes "²"
_BAD_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
_KEEP_ALIVE_TIMEOUT = re.compile(r"timeout\s*=\s*([0-9]+)", re.IGNORECASE)

Origin = tuple[str, str, int]  # scheme, host, port

# Parser states.
_HEAD, _LENGTH, _SIZE, _DATA, _DATA_END, _TRAILER, _UNTIL_CLOSE, _DONE = range(8)


class ProtocolError(Exception):
    """The deployment's bytes are not a valid HTTP/1.1 response."""


def address(url: str) -> tuple[Origin, str, str]:
    """``(origin, Host header, path)`` of an http(s) URL; the path keeps any query, and is ``""``
    for none. The default port is left out of the ``Host``, as clients do. ``ValueError`` for a
    URL that is not http(s) to a host, or whose port is not a valid one."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL naming a host: {url!r}")
    hostname = parts.hostname
    default_port = 443 if parts.scheme == "https" else 80
    port = parts.port or default_port
    host = f"[{hostname}]" if ":" in hostname else hostname
    if port != default_port:
        host += f":{port}"
    path = f"{parts.path}?{parts.query}" if parts.query else parts.path
    return (parts.scheme, hostname, port), host, path


def post_head(url: str, headers: dict[str, str], length: int) -> tuple[Origin, bytes]:
    """The origin of ``url`` and the whole head of a POST to it with a ``length``-byte body."""
    origin, host, path = address(url)
    return origin, request_head(request_prefix(path or "/", host, headers), {}, length)


def request_prefix(path: str, host: str, headers: dict[str, str]) -> bytes:
    """The part of a POST's head that is the same for every request to ``path``."""
    lines = [f"POST {path} HTTP/1.1", f"Host: {host}"]
    lines += [f"{name}: {_checked(value)}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n").encode("latin-1")


def request_head(prefix: bytes, headers: dict[str, str], length: int) -> bytes:
    """The whole head: ``prefix``, this request's own headers, ``Content-Length``, blank line.

    Raises ``ValueError`` for a value that would break the head (a control character, or one
    that is not Latin-1): header injection must not reach a deployment.
    """
    extra = "".join(f"{name}: {_checked(value)}\r\n" for name, value in headers.items())
    return prefix + extra.encode("latin-1") + b"Content-Length: %d\r\n\r\n" % length


def _checked(value: str) -> str:
    if _BAD_VALUE.search(value):
        raise ValueError("a header value holds a control character")
    return value


def idle_seconds(keep_alive: str | None, default: float) -> float:
    """How long an idle connection may be kept: ``default``, or a second less than the
    deployment's own ``Keep-Alive: timeout=N``, so it never closes one just as it is reused."""
    if keep_alive:
        found = _KEEP_ALIVE_TIMEOUT.search(keep_alive)
        if found:
            return min(default, max(0.0, int(found.group(1)) - 1.0))
    return default


class Head:
    """A response's status line and headers (names in lower case; repeats joined by ", ")."""

    __slots__ = ("headers", "keep_alive", "status")

    def __init__(self, status: int, headers: dict[str, str], keep_alive: bool) -> None:
        self.status = status
        self.headers = headers
        self.keep_alive = keep_alive  # the connection may carry another request afterwards


class ResponseParser:
    """One response at a time; ``reset`` before the next one on the same connection."""

    __slots__ = ("_buf", "_decoded", "_decoder", "_need", "_state", "head")

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self._buf = b""
        self._state = _HEAD
        self._need = 0
        self._decoder: zlib._Decompress | None = None
        self._decoded = False  # the decoder was given compressed bytes
        self.head: Head | None = None

    @property
    def done(self) -> bool:
        """The body is complete."""
        return self._state == _DONE

    @property
    def leftover(self) -> bool:
        """Bytes arrived beyond the end of the response (the connection is not reusable)."""
        return bool(self._buf)

    def feed_eof(self) -> bytes:
        """The connection closed: completes a read-until-close body (returning any bytes the
        decoder still held), else raises ``ProtocolError`` unless the response was complete."""
        if self._state == _UNTIL_CLOSE:
            self._state = _DONE
            return self._flush()
        if self._state != _DONE:
            raise ProtocolError("the connection closed before the response was complete")
        return b""

    def feed(self, data: bytes) -> bytes:
        """Parse ``data``; returns the body bytes it completed (``b""`` when none)."""
        buf = self._buf + data if self._buf else data
        out: list[bytes] = []
        pos = self._unframe(buf, out)
        self._buf = buf[pos:] if pos < len(buf) else b""
        body = out[0] if len(out) == 1 else b"".join(out)
        return body if self._decoder is None else self._decode(body, self._state == _DONE)

    def _unframe(self, buf: bytes, out: list[bytes]) -> int:
        """Walk the framing states over ``buf`` from where the last read left them, adding the
        body bytes to ``out``; returns how far into ``buf`` it got. The body states are inlined:
        they run for every read of every stream; the head and the trailers are steps of their
        own, met once per response."""
        pos = 0
        end_of_buf = len(buf)
        state = self._state
        while True:
            if state in (_DATA, _LENGTH):
                take = min(self._need, end_of_buf - pos)
                if take:
                    out.append(buf[pos : pos + take])
                    pos += take
                    self._need -= take
                if self._need:
                    break
                # A chunk's data is followed by CRLF; a Content-Length body is simply done.
                state = _DATA_END if state == _DATA else _DONE
            elif state == _DATA_END:
                if end_of_buf - pos < 2:
                    break
                if buf[pos : pos + 2] != _CRLF:
                    raise ProtocolError("chunk data not followed by CRLF")
                pos += 2
                state = _SIZE
            elif state == _SIZE:
                end = _line_end(buf, pos, "chunk-size line")
                if end < 0:
                    break
                size = _chunk_size(buf[pos:end])
                pos = end + 2
                if size:
                    self._need, state = size, _DATA
                else:
                    state = _TRAILER
            elif state == _UNTIL_CLOSE:
                if pos < end_of_buf:
                    out.append(buf[pos:] if pos else buf)
                    pos = end_of_buf
                break
            elif state in (_HEAD, _TRAILER):
                step = self._head_step if state == _HEAD else _trailer_step
                moved, state = step(buf, pos)
                if moved == pos:  # the head or the line is not complete yet
                    break
                pos = moved
            else:  # _DONE: anything further stays in the buffer (``leftover``)
                break
        self._state = state
        return pos

    def _head_step(self, buf: bytes, pos: int) -> tuple[int, int]:
        """The status line and headers at ``pos``, once all arrived: ``(where the body starts,
        its framing state)``; ``(pos, _HEAD)`` while incomplete."""
        end = buf.find(_HEAD_END, pos)
        if end < 0:
            _limit(len(buf) - pos, MAX_HEAD, "response head")
            return pos, _HEAD
        return end + 4, self._head(buf[pos:end])

    def _decode(self, body: bytes, done: bool) -> bytes:
        """Undo the content coding of this read's body bytes (and finish it at the end)."""
        assert self._decoder is not None
        try:
            if body:
                self._decoded = True
                body = self._decoder.decompress(body)
        except zlib.error as exc:
            raise ProtocolError(f"bad compressed body: {exc}") from None
        return body + self._flush() if done else body

    def _flush(self) -> bytes:
        decoder, self._decoder = self._decoder, None
        if decoder is None or not self._decoded:
            return b""  # no body at all (a 204, or Content-Length: 0) is not a truncated one
        try:
            rest = decoder.flush()
        except zlib.error as exc:
            raise ProtocolError(f"bad compressed body: {exc}") from None
        if not decoder.eof:
            raise ProtocolError("the compressed body is truncated")
        if decoder.unused_data:
            raise ProtocolError("bytes after the end of the compressed body")
        return rest

    def _head(self, raw: bytes) -> int:
        """Parse a head; returns the next state (``_HEAD`` again after an interim 1xx)."""
        lines = raw.decode("latin-1").split("\r\n")
        version, _, rest = lines[0].partition(" ")
        code = rest[:3]
        if version not in ("HTTP/1.1", "HTTP/1.0") or not _DIGITS.fullmatch(code) or len(code) != 3:
            raise ProtocolError(f"bad status line {lines[0][:80]!r}")
        status = int(code)
        if 100 <= status < 200:
            if status == 101:
                raise ProtocolError("the deployment switched protocols unasked")
            return _HEAD  # an interim response: the real one follows
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep or not name or name != name.strip():
                raise ProtocolError(f"bad header line {line[:80]!r}")
            name = name.lower()
            value = value.strip()
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        connection = headers.get("connection", "").lower()
        # HTTP/1.0 keep-alive is not worth its corner cases here: such a connection is closed.
        keep_alive = version == "HTTP/1.1" and "close" not in connection
        self._decoder = _decoder(headers.get("content-encoding"))
        coding = headers.get("transfer-encoding")
        length = headers.get("content-length")
        if status in (204, 304):
            state = _DONE
        elif coding is not None:
            # Only plain chunked: a transfer coding such as gzip on top is not worth supporting.
            if coding.strip().lower() != "chunked":
                raise ProtocolError(f"unsupported transfer-encoding {coding[:40]!r}")
            state = _SIZE
            if length is not None:
                keep_alive = False  # both framings: smuggling-shaped, never reuse it
        elif length is not None:
            if not _DIGITS.fullmatch(length):
                raise ProtocolError(f"bad Content-Length {length[:20]!r}")
            self._need = int(length)
            state = _LENGTH if self._need else _DONE
        else:
            keep_alive, state = False, _UNTIL_CLOSE
        self.head = Head(status, headers, keep_alive)
        return state


def _trailer_step(buf: bytes, pos: int) -> tuple[int, int]:
    """One trailer line at ``pos`` (``(pos, _TRAILER)`` while incomplete); the blank line after
    the last chunk and its trailers ends the body."""
    end = _line_end(buf, pos, "trailer line")
    if end < 0:
        return pos, _TRAILER
    return end + 2, (_DONE if end == pos else _TRAILER)


def _chunk_size(line: bytes) -> int:
    digits = line.split(b";", 1)[0].strip()
    if not _HEX.fullmatch(digits):
        raise ProtocolError(f"bad chunk size {digits[:20]!r}")
    return int(digits, 16)


def _limit(size: int, limit: int, what: str) -> None:
    if size > limit:
        raise ProtocolError(f"{what} over {limit} bytes")


def _line_end(buf: bytes, pos: int, what: str) -> int:
    """Where the CRLF ending the line at ``pos`` is; -1 while it is incomplete."""
    end = buf.find(_CRLF, pos)
    if end < 0:
        _limit(len(buf) - pos, MAX_LINE, what)
    return end


def _decoder(coding: str | None) -> zlib._Decompress | None:
    if coding is None:
        return None
    coding = coding.strip().lower()
    if coding in ("", "identity"):
        return None
    if coding in ("gzip", "x-gzip"):
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if coding == "deflate":
        return zlib.decompressobj(32 + zlib.MAX_WBITS)  # zlib-wrapped, as RFC 9110 says
    raise ProtocolError(f"unsupported content-encoding {coding!r}")
