"""Incremental Server-Sent Events parser: bytes in as they arrive, complete frames out.

Only LF and CRLF line endings are recognised (a lone CR is not: no Anthropic-compatible server
sends it, and supporting it would force waiting on every trailing CR). A frame ends at a blank
line; its raw bytes (terminator included) are kept so unknown events can be relayed unchanged.
"""

from __future__ import annotations

from typing import NamedTuple

_LF = 0x0A
_CR = 0x0D


class SseError(ValueError):
    """The stream cannot be parsed (a frame grew beyond the limit)."""


class Frame(NamedTuple):
    event: bytes  # the ``event:`` field, b"" when absent
    data: bytes  # ``data:`` lines joined with LF; b"" for comment-only frames
    raw: bytes  # the frame exactly as received, blank-line terminator included


def parse_frame(raw: bytes, body_end: int) -> Frame:
    """Fields of one complete frame; ``raw[:body_end]`` is its lines without the blank line."""
    event = b""
    data: list[bytes] = []
    for line in raw[:body_end].split(b"\n"):
        if line.endswith(b"\r"):
            line = line[:-1]
        if not line or line[0] == 0x3A:  # ":" starts a comment (keep-alive)
            continue
        name, _, value = line.partition(b":")
        if value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            data.append(value)
        elif name == b"event":
            event = value
        # id: and retry: are meaningless for a relayed upstream stream; ignored.
    return Frame(event, data[0] if len(data) == 1 else b"\n".join(data), raw)


class SseParser:
    """Feed it every read; it returns the frames completed by that read, in order."""

    __slots__ = ("_buf", "_max_frame", "_scan")

    def __init__(self, max_frame: int = 8 * 1024 * 1024) -> None:
        self._buf = b""
        # Where the search for a frame terminator resumes, so a large frame arriving in many
        # reads is scanned once instead of once per read.
        self._scan = 0
        self._max_frame = max_frame

    @property
    def pending(self) -> int:
        """Bytes of an incomplete frame held back."""
        return len(self._buf)

    def feed(self, chunk: bytes) -> list[Frame]:
        buf = self._buf + chunk if self._buf else chunk
        if _CR_BYTE not in buf:
            return self._feed_lf(buf)
        frames: list[Frame] = []
        start = 0
        scan = self._scan
        size = len(buf)
        while start < size:
            first = buf[start]
            # Blank lines between frames carry nothing; skip them (a CR needs its LF to be sure).
            if first == _LF:
                start += 1
                continue
            if first == _CR:
                if start + 1 >= size:
                    break
                if buf[start + 1] == _LF:
                    start += 2
                    continue
            end = _terminator(buf, max(scan, start))
            if end < 0:
                break
            stop = end + (2 if buf[end + 1] == _LF else 3)
            frames.append(parse_frame(buf[start:stop], end - start))
            start = stop
        self._buf = buf[start:] if start else buf
        # The terminator may straddle this read and the next: rescan the last two bytes.
        self._scan = max(0, len(self._buf) - 2)
        if len(self._buf) > self._max_frame:
            raise SseError(f"an event exceeds {self._max_frame} bytes")
        return frames

    def _feed_lf(self, buf: bytes) -> list[Frame]:
        """The common case, LF line endings only: one split finds every complete frame."""
        parts = buf.split(b"\n\n")
        rest = parts.pop()  # after the last terminator: the start of an incomplete frame
        frames: list[Frame] = []
        for part in parts:
            if part[:1] == b"\n":  # extra blank lines between frames carry nothing
                part = part.lstrip(b"\n")
            if part:
                frames.append(_lf_frame(part))
        if rest[:1] == b"\n" and not rest.strip(b"\n"):
            rest = b"\n"  # keep one LF: it may be the first half of the next terminator
        self._buf = rest
        self._scan = max(0, len(rest) - 2)
        if len(rest) > self._max_frame:
            raise SseError(f"an event exceeds {self._max_frame} bytes")
        return frames


_CR_BYTE = b"\r"


def _lf_frame(body: bytes) -> Frame:
    """A frame's fields from its LF-separated lines (``body`` excludes the blank line)."""
    if body[:7] == b"event: ":
        nl = body.find(b"\n")
        if nl > 0 and body[nl + 1 : nl + 7] == b"data: " and body.find(b"\n", nl + 1) < 0:
            # "event: X" then one "data: Y" line: the shape of every Anthropic event.
            return Frame(body[7:nl], body[nl + 7 :], body + b"\n\n")
    return parse_frame(body + b"\n\n", len(body))


def _terminator(buf: bytes, start: int) -> int:
    """Index of the LF ending a frame's last line (followed by a blank line), or -1."""
    lf = buf.find(b"\n\n", start)
    if lf < 0:
        return buf.find(b"\n\r\n", start)
    # Only a CRLF terminator *before* the LF one matters: bound the search so a read holding
    # many LF frames stays linear instead of rescanning the whole buffer per frame.
    crlf = buf.find(b"\n\r\n", start, lf + 3)
    return lf if crlf < 0 else min(lf, crlf)
