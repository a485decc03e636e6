"""What the load generator reads in a reply (``loadgen.py``): a whole reply kept until its end,
or a stream scanned as bytes as it arrives (events counted, the first content delta and the end
timed, an error event or a missing end marker noted), for each reply format: Anthropic and
OpenAI SSE, Responses, and an AWS event stream (a Bedrock face answered directly).
"""

from __future__ import annotations

import base64
import re
import time

# The first content delta of each API's stream, and the marker of a complete stream.
_FIRST_ANTHROPIC = re.compile(rb"event: content_block_delta")
_FIRST_OPENAI = re.compile(rb'"content":\s?"[^"]')
_FIRST_RESPONSES = re.compile(rb"event: response\.output_text\.delta")
# "eventstream": a Bedrock face answered directly. Each chunk's payload is
# {"bytes":"base64(event JSON)"...}, and base64 of an event's first 3n bytes is fixed: the
# markers are the encoded starts of a content_block_delta and of message_stop.
_FIRST_EVENTS = re.compile(
    re.escape(b'"bytes":"' + base64.b64encode(b'{"type":"content_block_delta"'[:27]))
)
_END = {
    "anthropic": b"message_stop",
    "openai": b"[DONE]",
    "responses": b"event: response.completed",
    "eventstream": b'"bytes":"' + base64.b64encode(b'{"type":"message_stop"'[:21]),
}
FIRST = {
    "anthropic": _FIRST_ANTHROPIC,
    "openai": _FIRST_OPENAI,
    "responses": _FIRST_RESPONSES,
    "eventstream": _FIRST_EVENTS,
}
# What each event has once: SSE's blank line, an event stream's chunk header. And how many of
# a stream's last bytes the end marker is looked for in (a chunk ends with padding and a CRC).
_EVENT_MARK = {"eventstream": b":event-type\x07\x00\x05chunk"}
_TAIL = {"eventstream": 1024}
_ERROR_EVENT = {"eventstream": b":message-type\x07\x00\x09exception"}
_SAMPLE = 300  # bytes of a failed reply kept as the phase's error sample


class Reply:
    """A whole reply as it is read (``feed`` is the client's ``on_body``), and when it ended."""

    __slots__ = ("body", "ended")

    def __init__(self) -> None:
        self.body = bytearray()
        self.ended = 0

    def feed(self, piece: bytes) -> None:
        if piece:
            self.body += piece
        else:
            self.ended = time.perf_counter_ns()

    def sample(self) -> bytes:
        return bytes(self.body[:_SAMPLE])


class StreamScan:
    """What a stream's body shows as it is read (``feed`` is the client's ``on_body``): SSE
    events (blank-line terminators), the time of the first content delta and of the end, an
    error event, its first bytes (the detail of an HTTP error) and its last bytes (where the end
    marker is)."""

    __slots__ = (
        "each",
        "end_mark",
        "ended",
        "error",
        "error_mark",
        "events",
        "first",
        "keep",
        "marker",
        "saw_end",
        "start",
        "tail",
    )

    def __init__(self, marker: re.Pattern[bytes], api: str = "anthropic") -> None:
        self.marker = marker
        # Seen as the pieces pass (a Responses stream's last event carries the whole response
        # after its name, so no fixed tail would hold the marker): no copy kept to look back in.
        self.end_mark = _END[api]
        self.saw_end = False
        self.each = _EVENT_MARK.get(api, b"\n\n")
        self.keep = _TAIL.get(api, 32)
        self.error_mark = _ERROR_EVENT.get(api, b"event: error")
        self.first = 0
        self.ended = 0
        self.events = 0
        self.start = b""
        self.tail = b""
        self.error = b""

    def sample(self) -> bytes:
        return self.start

    def feed(self, piece: bytes) -> None:
        if not piece:
            self.ended = time.perf_counter_ns()
            return
        if len(self.start) < _SAMPLE:
            self.start += piece[: _SAMPLE - len(self.start)]
        tail = self.tail
        joined = tail + piece
        # Marks inside this piece, plus one straddling the previous piece.
        # (A mark is longer than one byte, so the tail's part cannot hold a whole one.)
        each = self.each
        self.events += (tail[1 - len(each) :] + piece).count(each)
        if not self.first and self.marker.search(joined):
            self.first = time.perf_counter_ns()
        if not self.error and self.error_mark in joined:
            self.error = joined
        if not self.saw_end and self.end_mark in joined:
            self.saw_end = True
        self.tail = joined[-self.keep :]
