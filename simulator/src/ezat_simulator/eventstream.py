"""AWS event-stream framing of the Bedrock face's streamed answers (pure; simulator/README.md,
"Bedrock face").

``InvokeModelWithResponseStream`` answers ``application/vnd.amazon.eventstream``: a sequence of
binary messages, each

    total length (uint32) | headers length (uint32) | CRC32 of those 8 bytes (uint32)
    headers: name length (uint8), name, value type (uint8; 7 = string), length (uint16), value
    payload
    CRC32 of everything before it (uint32)

all big-endian. A model event is a ``chunk``: headers ``:event-type: chunk``, ``:content-type:
application/json``, ``:message-type: event`` (in that order, as a captured Bedrock frame shows),
payload ``{"bytes": base64(one Anthropic stream event as JSON), "p": "abc..."}``. An error in
the stream is ``:message-type: exception`` with ``:exception-type`` naming the member of
botocore's ``ResponseStream`` shape (``throttlingException``, ``modelStreamErrorException``,
``internalServerException``, ...) and a JSON payload ``{"message": ...}``.

Written by hand because botocore has only the *decoder* (``botocore.eventstream``): it reads AWS
answers, it never has to write one. The encoder is the format's few lines above; the tests check
every frame it makes against botocore's ``EventStreamBuffer`` (CRCs, lengths, headers).

Not confirmed against a live capture: the ``p`` padding field. AWS pads the events of
``ConverseStream`` with a random-length ``p`` string (seen in the SDKs' issue trackers); that it
pads ``chunk`` payloads the same way is assumed. Decoders ignore the field either way.
"""

from __future__ import annotations

import base64
import struct
import zlib
from collections.abc import Sequence

import msgspec

CONTENT_TYPE = "application/vnd.amazon.eventstream"
_STRING = 7
_PRELUDE = struct.Struct("!II")
_CRC = struct.Struct("!I")
# What "p" holds: a prefix of this, whose length varies with the event so frame sizes do not
# track the text's length (which is why AWS pads).
_PAD = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def _header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode(), value.encode()
    return (
        struct.pack("!B", len(raw_name))
        + raw_name
        + struct.pack("!BH", _STRING, len(raw_value))
        + raw_value
    )


def headers_block(headers: Sequence[tuple[str, str]]) -> bytes:
    """The encoded headers of a message (string-valued, in the order given)."""
    return b"".join(_header(name, value) for name, value in headers)


def message(headers: bytes, payload: bytes) -> bytes:
    """One framed message: prelude, its CRC, the encoded ``headers``, ``payload``, the CRC."""
    prelude = _PRELUDE.pack(12 + len(headers) + len(payload) + 4, len(headers))
    body = prelude + _CRC.pack(zlib.crc32(prelude)) + headers + payload
    return body + _CRC.pack(zlib.crc32(body))


_CHUNK_HEADERS = headers_block(
    [(":event-type", "chunk"), (":content-type", "application/json"), (":message-type", "event")]
)


def padding(event: bytes) -> str:
    return _PAD[: 1 + len(event) % len(_PAD)]


def chunk(event: bytes) -> bytes:
    """A ``chunk`` message carrying one Anthropic stream event (its JSON bytes)."""
    encoded = base64.b64encode(event)
    payload = b'{"bytes":"' + encoded + b'","p":"' + padding(event).encode() + b'"}'
    return message(_CHUNK_HEADERS, payload)


def exception(kind: str, body: dict[str, object]) -> bytes:
    """An exception message; ``kind`` is a ``ResponseStream`` member (``throttlingException``)."""
    headers = headers_block(
        [
            (":exception-type", kind),
            (":content-type", "application/json"),
            (":message-type", "exception"),
        ]
    )
    return message(headers, msgspec.json.encode(body))
