"""core/stream.py: what each reply adds to a stream's next write, without a queue or a socket."""

from __future__ import annotations

from ezat_common.envelopes import (
    OWNER_LOST,
    PART_LOST,
    Heartbeat,
    ReplyBody,
    ReplyChunk,
    ReplyEnd,
    ReplyError,
    ReplyHead,
)
from ezat_edge.core.stream import (
    ANTHROPIC_PING,
    OPENAI_PING,
    StreamState,
    add_lost,
    add_reply,
    next_write,
    ping_for,
)

BOOM = ReplyError(status=500, type="api_error", message="boom")


def frame(err: ReplyError) -> bytes:
    return f"<{err.message}>".encode()


def fresh() -> StreamState:
    return StreamState()


def test_chunks_and_a_late_head_are_collected_in_order() -> None:
    state, parts = fresh(), []
    assert add_reply(state, parts, ReplyHead(data=b"h"), frame) == "more"
    assert add_reply(state, parts, ReplyChunk(data=b"a", seq=1), frame) == "more"
    assert add_reply(state, parts, Heartbeat(), frame) == "more"
    assert add_reply(state, parts, ReplyChunk(data=b"b", seq=2), frame) == "more"
    assert parts == [b"h", b"a", b"b"] and not state.complete


def test_end_without_usage_is_final_and_complete() -> None:
    state, parts = fresh(), [b"a"]
    assert add_reply(state, parts, ReplyEnd(data=b"z"), frame) == "final"
    assert parts == [b"a", b"z"] and state.complete


def test_end_with_usage_is_held_out_of_the_bytes() -> None:
    state, parts = fresh(), [b"a"]
    assert add_reply(state, parts, ReplyEnd(data=b"z", usage=b"record"), frame) == "held"
    assert parts == [b"a"] and not state.complete


def test_error_is_final_as_its_frame() -> None:
    state, parts = fresh(), []
    assert add_reply(state, parts, BOOM, frame) == "final"
    assert parts == [b"<boom>"]


def test_a_lost_holder_or_part_ends_the_write_with_its_error_event() -> None:
    """Whether a number was skipped, or the holder fell silent, is the exchange's (the table in
    tests/common/test_exchange.py; the collector's in tests/edge/test_stream_collector.py)."""
    parts = [b"a"]
    add_lost(parts, frame, PART_LOST)
    assert parts == [b"a", frame(PART_LOST)]
    add_lost(parts, frame, OWNER_LOST)
    assert parts[-1] == frame(OWNER_LOST)


def test_next_write_is_the_collected_bytes_else_a_due_ping() -> None:
    assert next_write([], False, "anthropic") == b""
    assert next_write([], True, "openai") == OPENAI_PING
    assert next_write([b"a", b"b"], True, "anthropic") == b"ab"


def test_ping_per_api() -> None:
    assert ping_for("anthropic") == ANTHROPIC_PING
    assert ping_for("openai") == OPENAI_PING


def test_a_whole_body_inside_a_stream_is_ignored() -> None:
    state, parts = fresh(), []
    assert add_reply(state, parts, ReplyBody(data=b"{}"), frame) == "ignored"
    assert parts == []
