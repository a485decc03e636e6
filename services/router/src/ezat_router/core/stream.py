"""The pure step of the streaming relay: the frames of one upstream read in, what to do out.

The relay loop (``relay.py``) reads, parses with ``SseParser``, calls ``StreamStep.step`` and
publishes ``data`` as one chunk. This step decodes each event once, feeds usage, rewrites the
model in message_start, holds back message_delta and message_stop (the final reply carries both:
the delta's usage gets the answer's ``cost_usd`` once the record is priced; released only after
billing's ack) and stops at an upstream error. Unknown or undecodable events are counted and
forwarded unchanged. Keep-alive comment frames are dropped: the edge sends its own pings to the
client.
"""

from __future__ import annotations

import msgspec
from ezat_common.schemas.anthropic import (
    ContentBlockDelta,
    Error,
    ErrorInfo,
    MessageDelta,
    MessageStart,
    MessageStop,
    Ping,
    decode_event,
)
from ezat_common.sse import Frame

from .accounting import UsageAccumulator
from .payload import PayloadError, message_start_frame

_UNDECODABLE = (msgspec.DecodeError, msgspec.ValidationError)


class StepResult:
    """What one read produced. ``data`` is forwarded now; the rest are signals."""

    __slots__ = ("data", "delta", "error", "events", "first_delta", "invalid", "stop", "unknown")

    def __init__(self) -> None:
        self.data = b""
        self.stop: bytes | None = None  # the held message_stop frame
        self.delta: bytes | None = None  # with ``stop``: the held message_delta's JSON, if any
        self.error: ErrorInfo | None = None  # an upstream ``event: error``
        self.invalid = False  # the stream did not open with message_start
        self.first_delta = False  # a content_block_delta was in this read
        self.events = 0
        self.unknown = 0

    @property
    def finished(self) -> bool:
        return self.stop is not None or self.error is not None or self.invalid


class StreamStep:
    """Per-request state of the relay between reads; ``step`` never awaits."""

    __slots__ = ("_delta", "_model", "started", "usage")

    def __init__(self, response_model: str, usage: UsageAccumulator) -> None:
        self._model = response_model
        self.usage = usage
        self.started = False  # message_start seen (and forwarded)
        self._delta: Frame | None = None  # the message_delta held for the final reply

    def step(self, frames: list[Frame]) -> StepResult:
        result = StepResult()
        out: list[bytes] = []
        for frame in frames:
            if not frame.data:
                continue
            try:
                event = decode_event(frame.data)
            except _UNDECODABLE:
                # Unknown to this gateway (a new event or block type): relay, never crash. Before
                # message_start nothing may be sent, so it is dropped there.
                result.unknown += 1
                if self.started:
                    out.append(frame.raw)
                continue
            result.events += 1
            if isinstance(event, MessageStart) and not self.started:
                try:
                    out.append(message_start_frame(frame.data, self._model))
                except (PayloadError, *_UNDECODABLE):
                    result.invalid = True
                    break
                self.started = True
                self.usage.feed(event)
            elif isinstance(event, Error):
                result.error = event.error
                break
            elif not self.started:
                # A deployment may ping before it starts; anything else there is not the
                # Messages stream protocol.
                if not isinstance(event, Ping):
                    result.invalid = True
                    break
            elif isinstance(event, ContentBlockDelta):
                result.first_delta = True
                self.usage.feed(event)
                out.append(frame.raw)
            elif isinstance(event, MessageDelta):
                self.usage.feed(event)
                if self._delta is not None:  # only the last is held (Anthropic sends one)
                    out.append(self._delta.raw)
                self._delta = frame
            elif isinstance(event, MessageStop):
                result.stop = frame.raw
                result.delta = self._delta.data if self._delta is not None else None
                break
            else:
                self.usage.feed(event)
                out.append(frame.raw)
        if out:
            result.data = out[0] if len(out) == 1 else b"".join(out)
        return result
