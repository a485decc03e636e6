"""A Bedrock stream (``invoke-with-response-stream``) as an AWS event stream: each SSE event the
Anthropic face's writer (``stream.send_stream``) produces becomes a ``chunk`` message
(``eventstream.py``), ``message_stop`` gains ``amazon-bedrock-invocationMetrics``, and a
mid-stream failure becomes an ``exception`` message."""

from __future__ import annotations

import time
from typing import Any

import msgspec

from . import engine, eventstream
from .bedrock_wire import BedrockError, exception_name, stream_member
from .faults import Fault
from .stream import SseResponse

_encode = msgspec.json.encode


class EventStreamResponse(SseResponse):
    """Writes each SSE event ``send_stream`` hands it as an event-stream message instead, so a
    Bedrock stream is paced and broken exactly as an Anthropic one (``stream.py``)."""

    def __init__(self, plan: engine.Plan, fault: Fault | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._plan = plan
        self._failure = _stream_failure(fault)
        self._started = time.monotonic()
        self._first_byte: float | None = None

    async def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._first_byte is None:
            self._first_byte = time.monotonic()
        await super().write(self._frame(bytes(data)))

    def _frame(self, sse_event: bytes) -> bytes:
        name, _, rest = sse_event.partition(b"\ndata: ")
        if name == b"event: error":
            kind, body = self._failure
            return eventstream.exception(kind, body)
        payload = rest[:-2]  # the event's JSON, without the blank line ending the SSE event
        if name == b"event: message_stop":
            payload = _encode({"type": "message_stop", **self._metrics()})
        return eventstream.chunk(payload)

    def _metrics(self) -> dict[str, Any]:
        now, usage = time.monotonic(), self._plan.usage
        first = self._first_byte or now
        return {
            "amazon-bedrock-invocationMetrics": {
                "inputTokenCount": usage.input_tokens,
                "outputTokenCount": usage.output_tokens,
                "invocationLatency": round((now - self._started) * 1000),
                "firstByteLatency": round((first - self._started) * 1000),
                "cacheReadInputTokenCount": usage.cache.read,
                "cacheWriteInputTokenCount": usage.cache.written,
            }
        }


def _stream_failure(fault: Fault | None) -> tuple[str, dict[str, Any]]:
    """The exception a failing stream ends with: the fault's, else the model's own overload
    relayed as a modelStreamErrorException (its original status 529; not confirmed live)."""
    if fault is not None and fault.bedrock_exception is not None:
        err = BedrockError(exception_name(fault.bedrock_exception))
        return stream_member(err.error_type), {"message": err.message}
    return "modelStreamErrorException", {
        "message": "The model stream returned an error.",
        "originalStatusCode": 529,
        "originalMessage": "Overloaded",
    }
