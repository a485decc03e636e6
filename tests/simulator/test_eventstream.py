"""The event-stream encoder (ezat_simulator.eventstream) read back by botocore's own decoder."""

from __future__ import annotations

import base64
import json

import pytest
from botocore.eventstream import ChecksumMismatch, EventStreamBuffer
from ezat_simulator import eventstream
from hypothesis import given
from hypothesis import strategies as st


def decoded(data: bytes) -> list[tuple[dict[str, object], bytes]]:
    buffer = EventStreamBuffer()
    buffer.add_data(data)
    return [(message.headers, message.payload) for message in buffer]


@given(st.binary(max_size=4096))
def test_a_chunk_decodes_to_bedrocks_headers_and_the_event(event: bytes) -> None:
    ((headers, payload),) = decoded(eventstream.chunk(event))
    assert headers == {
        ":event-type": "chunk",
        ":content-type": "application/json",
        ":message-type": "event",
    }
    body = json.loads(payload)
    assert base64.b64decode(body["bytes"]) == event
    assert body["p"] == eventstream.padding(event) and body["p"]


def test_frames_split_anywhere_decode_in_order() -> None:
    events = [json.dumps({"type": "ping", "n": i}).encode() for i in range(5)]
    data = b"".join(eventstream.chunk(e) for e in events)
    buffer = EventStreamBuffer()
    out = []
    for i in range(0, len(data), 7):  # as a network delivers them: in arbitrary pieces
        buffer.add_data(data[i : i + 7])
        out.extend(json.loads(m.payload)["bytes"] for m in buffer)
    assert [base64.b64decode(b) for b in out] == events


def test_an_exception_message_names_its_type() -> None:
    frame = eventstream.exception("throttlingException", {"message": "slow down"})
    ((headers, payload),) = decoded(frame)
    assert headers[":message-type"] == "exception"
    assert headers[":exception-type"] == "throttlingException"
    assert json.loads(payload) == {"message": "slow down"}


def test_a_corrupted_frame_fails_botocores_checksum() -> None:
    frame = bytearray(eventstream.chunk(b'{"type":"message_stop"}'))
    frame[20] ^= 0xFF
    with pytest.raises(ChecksumMismatch):
        decoded(bytes(frame))
