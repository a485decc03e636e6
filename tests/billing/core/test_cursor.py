"""core/cursor.py: a page's cursor round-trips; a foreign one is refused with one message."""

from __future__ import annotations

import datetime

import msgspec
import pytest
from ezat_billing.core.cursor import (
    CURSOR_ERROR,
    InvalidCursor,
    Position,
    decode_cursor,
    encode_cursor,
)
from ezat_common import envelopes, usage_page

UTC = datetime.UTC


def test_cursor_round_trips_to_the_microsecond() -> None:
    at = datetime.datetime(2025, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)
    pos = Position(at, "req_1")
    assert decode_cursor(encode_cursor(pos)) == pos


@pytest.mark.parametrize("cursor", ["", "not-base64!!", "AAAA", "eyJhIjoxfQ", "é"])
def test_foreign_cursors_are_refused(cursor: str) -> None:
    with pytest.raises(InvalidCursor, match=r"^cursor: not a cursor this API returned$"):
        decode_cursor(cursor)


def test_cursor_of_another_version_is_refused() -> None:
    import base64

    raw = msgspec.msgpack.encode((2, 0, "req"))
    with pytest.raises(InvalidCursor):
        decode_cursor(base64.urlsafe_b64encode(raw).decode())


def test_error_reply_is_just_the_message() -> None:
    reply = usage_page.decode_usage_reply(
        envelopes.encode(usage_page.UsageError(error=CURSOR_ERROR))
    )
    assert reply == usage_page.UsageError(error="cursor: not a cursor this API returned")
