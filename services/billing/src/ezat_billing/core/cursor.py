"""Opaque page cursors of the usage listing: the position ``(received_at, uid)`` of the last record
a page showed (uid, unique, breaks ties; request ids may repeat; for rows stored before uids existed
the uid is the request id, so older cursors still read right). Records are listed newest first, so
the next page holds the records strictly before that position (keyset pagination: stable while new
records arrive).
"""

from __future__ import annotations

import base64
import binascii
import datetime

import msgspec

# Bumped if the encoding ever changes, so that old cursors are refused instead of misread.
_VERSION = 1
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_decode = msgspec.msgpack.Decoder(tuple[int, int, str]).decode
_encode = msgspec.msgpack.Encoder().encode

CURSOR_ERROR = "cursor: not a cursor this API returned"


class InvalidCursor(ValueError):
    """The client sent a cursor that no page of this API produced."""

    def __init__(self) -> None:
        super().__init__(CURSOR_ERROR)


class Position(msgspec.Struct, frozen=True):
    received_at: datetime.datetime
    uid: str


def encode_cursor(position: Position) -> str:
    # Integer microseconds: exactly PostgreSQL's timestamptz resolution, so no float rounding.
    micros = (position.received_at - _EPOCH) // datetime.timedelta(microseconds=1)
    raw = _encode((_VERSION, micros, position.uid))
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> Position:
    """The position encoded in ``cursor``; ``InvalidCursor`` for anything else."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        version, micros, uid = _decode(raw)
        received_at = _EPOCH + datetime.timedelta(microseconds=micros)
    except (binascii.Error, ValueError, msgspec.DecodeError, OverflowError):
        raise InvalidCursor() from None
    if version != _VERSION or not uid:
        raise InvalidCursor()
    return Position(received_at=received_at, uid=uid)
