"""What Bedrock answers, in the Anthropic formats the router already reads (docs/routing.md,
"Deployment kinds", "Answers").

- ``EventStreamParser``: InvokeModelWithResponseStream's ``application/vnd.amazon.eventstream``
  in, the ``Frame`` list ``SseParser`` would give for the same Anthropic events out, so
  ``StreamStep`` and the relay loop are the same for every kind. The framing (prelude, CRCs,
  headers) is botocore's ``EventStreamBuffer``, one per stream; this module only reads each
  message: a ``chunk`` carries ``{"bytes": base64(event JSON)}``, an ``exception`` becomes the
  Anthropic ``error`` event whose type ``from_stream_error`` maps as the table below says.
- ``count_refused``: CountTokens' refusal of a model it cannot count (``core/counting``).
- ``bedrock_error``: a non-2xx answer (``x-amzn-ErrorType`` or ``__type``, ``{"message"}``,
  read by botocore's rest-json error parser) -> the status and Anthropic error body that
  ``from_status`` maps as it would an Anthropic deployment's.

``STATUS_OF_ERROR`` is the one table for both: the status an error type stands for. Bedrock's
own statuses are not used (``ServiceQuotaExceededException`` is a 400 there, a quota is a rate
limit here; ``ModelNotReadyException`` a 429, here an overload: failover, not a cooldown).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Mapping
from typing import Any

import msgspec
from botocore.eventstream import (
    EventStreamBuffer,
    EventStreamHeaderParser,
    EventStreamMessage,
    ParserError,
)
from botocore.parsers import RestJSONParser
from ezat_common.errors import type_for_status
from ezat_common.sse import Frame, SseError

from .answers import ErrorAnswer, error_body

STATUS_OF_ERROR: dict[str, int] = {
    "ThrottlingException": 429,  # rests the deployment (cooldown)
    "ServiceQuotaExceededException": 429,
    "ModelNotReadyException": 529,  # fails over before the first byte
    "ServiceUnavailableException": 503,
    "InternalServerException": 500,
    "ModelErrorException": 500,
    "ModelStreamErrorException": 500,  # refined by its originalStatusCode (_status_of)
    "ModelTimeoutException": 504,
    "ValidationException": 400,  # relayed with Bedrock's message
    "ResourceNotFoundException": 404,
    # The deployment's credentials: from_status marks it sick ("auth") and fails over.
    "AccessDeniedException": 403,
    "UnrecognizedClientException": 403,
    "InvalidSignatureException": 403,
    "IncompleteSignatureException": 403,
    "MissingAuthenticationTokenException": 403,
    "ExpiredTokenException": 403,
}
# What a model error's ``originalStatusCode`` (the model's own answer) stands for.
_ORIGINAL_STATUS = {429: 429, 503: 529, 529: 529}
# A Bedrock-only field of message_stop; dropped so the client sees the Anthropic API's event.
_METRICS = b"amazon-bedrock-invocationMetrics"
# Not an event this gateway knows: StreamStep counts it (undecodable) and relays nothing.
_UNKNOWN = Frame(b"", b"<unknown event-stream message>", b"")
_TYPE_PREFIX = b'{"type":"'
_LF, _CR = 0x0A, 0x0D
# What botocore raises on bytes that are not an event stream (a bad CRC or length, a truncated
# header, an unknown header type, a name that is not UTF-8).
_GARBAGE = (ParserError, struct.error, KeyError, UnicodeDecodeError)
_UNDECODABLE = (msgspec.DecodeError, msgspec.ValidationError)
_REMEMBERED = 8


class _Chunk(msgspec.Struct):
    event: bytes = msgspec.field(name="bytes")  # msgspec decodes the base64


class _Typed(msgspec.Struct):
    type: str = ""


_decode_chunk = msgspec.json.Decoder(_Chunk).decode
_decode_typed = msgspec.json.Decoder(_Typed).decode
_decode_object = msgspec.json.Decoder(dict[str, Any]).decode
_encode = msgspec.json.encode


# botocore ships no types: its classes are Any to mypy.
class _RememberingHeaderParser(EventStreamHeaderParser):  # type: ignore[misc]
    """botocore's header parser, parsing each distinct header block of a stream once: every
    ``chunk`` of a stream has the same one, and parsing it is half of botocore's cost per
    message (docs/routing.md, "Cost of the Bedrock stream")."""

    def __init__(self) -> None:
        super().__init__()
        self._seen: dict[bytes, dict[str, Any]] = {}

    def parse(self, data: bytes) -> dict[str, Any]:
        headers = self._seen.get(data)
        if headers is None:
            headers = super().parse(data)
            if len(self._seen) < _REMEMBERED:  # a stream has two or three distinct blocks
                self._seen[data] = headers
        return headers


class EventStreamParser:
    """``SseParser``'s interface for an event stream: feed it every read, it returns the frames
    that read completed; ``SseError`` on bytes that are not an event stream or a message held
    back beyond ``max_frame`` bytes."""

    __slots__ = ("_buffer", "_max_frame", "_pending")

    def __init__(self, max_frame: int = 8 * 1024 * 1024) -> None:
        self._buffer = EventStreamBuffer()
        # The buffer's own header parser, replaced by the remembering one (the same parse).
        # Should botocore rename the attribute, this only costs speed: the buffer then uses
        # its own parser, and the tests still pass.
        self._buffer._header_parser = _RememberingHeaderParser()
        self._max_frame = max_frame
        self._pending = 0

    @property
    def pending(self) -> int:
        """Bytes of an incomplete message held back."""
        return self._pending

    def feed(self, chunk: bytes) -> list[Frame]:
        buffer = self._buffer
        buffer.add_data(chunk)
        pending = self._pending + len(chunk)
        frames: list[Frame] = []
        try:
            for message in buffer:
                pending -= message.prelude.total_length
                frames.append(_frame(message))
        except _GARBAGE as exc:
            raise SseError(f"not an AWS event stream: {exc}") from None
        self._pending = pending
        if pending > self._max_frame:
            raise SseError(f"an event exceeds {self._max_frame} bytes")
        return frames


def _frame(message: EventStreamMessage) -> Frame:
    headers = message.headers
    kind = headers.get(":message-type")
    if kind == "event":
        if headers.get(":event-type") == "chunk":
            return chunk_frame(message.payload)
        return _UNKNOWN
    if kind == "exception":
        return exception_frame(str(headers.get(":exception-type", "")), message.payload)
    if kind == "error":  # the event-stream protocol's own error (no payload)
        code = str(headers.get(":error-code", ""))
        fields = {"message": str(headers.get(":error-message", ""))}
        return error_frame(_status_of(code, fields, 500), _message(fields))
    return _UNKNOWN


def chunk_frame(payload: bytes) -> Frame:
    """The frame ``SseParser`` gives for ``event: <type>\\ndata: <event>\\n\\n``, ``<event>``
    being the Anthropic event a ``chunk`` payload carries."""
    try:
        event = _decode_chunk(payload).event
    except _UNDECODABLE:
        return _UNKNOWN
    if _LF in event or _CR in event:  # an int needle is a memchr; a bytes one is ten times slower
        # One SSE data line per event: re-encode pretty-printed JSON compactly; what is not
        # JSON is never relayed (its line breaks could forge frames).
        try:
            event = msgspec.json.format(event, indent=-1)  # -1: no whitespace at all
        except _UNDECODABLE:
            return Frame(b"", event, b"")
    end = event.find(b'"', 9) if event.startswith(_TYPE_PREFIX) else -1
    if end > 0:  # how every Anthropic event is encoded: no decoding needed for its type
        name = event[9:end]
    else:
        try:
            name = _decode_typed(event).type.encode()
        except _UNDECODABLE:
            name = b""
    if name == b"message_stop" and _METRICS in event:
        event = _without_metrics(event)
    if not name:
        return Frame(b"", event, b"data: %b\n\n" % event)
    return Frame(name, event, b"".join((b"event: ", name, b"\ndata: ", event, b"\n\n")))


def _without_metrics(event: bytes) -> bytes:
    try:
        fields = _decode_object(event)
    except _UNDECODABLE:
        return event
    fields.pop(_METRICS.decode(), None)
    return _encode(fields)


def exception_frame(member: str, payload: bytes) -> Frame:
    """The Anthropic ``error`` event an ``exception`` message (``:exception-type`` ``member``,
    e.g. ``throttlingException``; payload ``{"message": ...}``) stands for."""
    fields = _object(payload)
    code = member[:1].upper() + member[1:]
    return error_frame(_status_of(code, fields, 500), _message(fields))


def error_frame(status: int, message: str) -> Frame:
    data = _encode(
        {"type": "error", "error": {"type": type_for_status(status), "message": message}}
    )
    return Frame(b"error", data, b"event: error\ndata: %b\n\n" % data)


def bedrock_error(status: int, headers: Mapping[str, str], body: bytes) -> ErrorAnswer:
    """A non-2xx Bedrock answer as ``from_status`` reads an Anthropic one. ``headers`` have
    lower-case names (as ``ezat_http1`` gives them). The message is Bedrock's own (it names
    the problem, never the prompt); unknown types keep their HTTP status. An Anthropic error
    body (the ``messages`` wire relays the model's own) passes unchanged."""
    fields = _object(body)
    if fields.get("type") == "error" and "x-amzn-errortype" not in headers:
        return ErrorAnswer(status, body, headers.get("retry-after"))
    code = _error_code(status, headers, body if fields else b"")
    mapped = _status_of(code, fields, status)
    return ErrorAnswer(mapped, error_body(mapped, _message(fields)), headers.get("retry-after"))


def _error_code(status: int, headers: Mapping[str, str], body: bytes) -> str:
    """botocore's reading of the error type: ``x-amzn-ErrorType`` before the body's ``code`` or
    ``__type``, without its ``:…`` suffix or ``…#`` namespace."""
    response: dict[str, Any] = {"status_code": status, "headers": {}, "body": body}
    error_type = headers.get("x-amzn-errortype")
    if error_type is not None:
        response["headers"]["x-amzn-errortype"] = error_type
    try:
        parsed = RestJSONParser().parse(response, None)
    except (AttributeError, TypeError, ValueError):
        return ""
    code = parsed.get("Error", {}).get("Code", "")
    return code if isinstance(code, str) else ""


def _status_of(code: str, fields: Mapping[str, Any], default: int) -> int:
    status = STATUS_OF_ERROR.get(code, default)
    if code in ("ModelStreamErrorException", "ModelErrorException"):
        original = fields.get("originalStatusCode")
        if isinstance(original, int):
            return _ORIGINAL_STATUS.get(original, status)
    return status


def _object(payload: bytes) -> dict[str, Any]:
    try:
        return _decode_object(payload) if payload else {}
    except _UNDECODABLE:
        return {}


def _message(fields: Mapping[str, Any]) -> str:
    message = fields.get("message", fields.get("Message", ""))
    return message if isinstance(message, str) else ""


# How CountTokens refuses a model it cannot count. AWS documents that some Claude models, those
# launched with cross-Region inference only among them, do not support CountTokens on
# bedrock-runtime (userguide/count-tokens.html), not the error; users report a
# ValidationException "The provided model doesn't support counting tokens." for inference
# profiles. Read loosely (the wording is not documented), and only on a ValidationException.
_COUNT_REFUSED = re.compile(
    r"(?:doesn't|doesn\u2019t|does not|not) support(?:s)? (?:counting tokens|token counting"
    r"|count ?tokens)",
    re.IGNORECASE,
)


def count_refused(status: int, headers: Mapping[str, str], body: bytes) -> bool:
    """Whether a CountTokens answer says the model cannot count (rather than that the body is
    wrong): a 400 ValidationException worded as ``_COUNT_REFUSED``."""
    if status != 400:
        return False
    fields = _object(body)
    code = _error_code(status, headers, body if fields else b"")
    return code == "ValidationException" and bool(_COUNT_REFUSED.search(_message(fields)))


class _Counted(msgspec.Struct):
    inputTokens: int


def count_tokens_answer(body: bytes) -> bytes:
    """Bedrock CountTokens' ``{"inputTokens": N}`` as the Anthropic API's count_tokens answer,
    ``{"input_tokens": N}`` (API_runtime_CountTokens). A body without the count is relayed as
    received: ``forwarder.body`` relays count answers unparsed, and the client's SDK reports
    what it cannot read."""
    try:
        counted = msgspec.json.decode(body, type=_Counted)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return body
    return b'{"input_tokens":%d}' % counted.inputTokens
