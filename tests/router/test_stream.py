"""core.stream: the pure step of the streaming relay."""

from __future__ import annotations

import msgspec
from ezat_common.sse import Frame, SseParser
from ezat_router.core.accounting import UsageAccumulator
from ezat_router.core.stream import StreamStep


def frame(event: str, obj: object) -> bytes:
    return f"event: {event}\ndata: ".encode() + msgspec.json.encode(obj) + b"\n\n"


START = frame(
    "message_start",
    {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "type": "message",
            "model": "upstream-name",
            "content": [],
            "usage": {"input_tokens": 11, "output_tokens": 1},
        },
    },
)
PING = frame("ping", {"type": "ping"})
BLOCK = frame(
    "content_block_start",
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
)
DELTA = frame(
    "content_block_delta",
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hello"}},
)
STOP_BLOCK = frame("content_block_stop", {"type": "content_block_stop", "index": 0})
MSG_DELTA = frame(
    "message_delta",
    {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3}},
)
STOP = frame("message_stop", {"type": "message_stop"})
ERROR = frame("error", {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}})
UNKNOWN = frame("brand_new", {"type": "brand_new", "x": 1})


def frames(*raw: bytes) -> list[Frame]:
    return SseParser().feed(b"".join(raw))


def new_step() -> StreamStep:
    return StreamStep("claude-x", UsageAccumulator())


def test_message_start_is_rewritten_and_the_rest_relayed_unchanged() -> None:
    step = new_step()
    result = step.step(frames(START, PING, BLOCK, DELTA))
    assert result.data.startswith(b"event: message_start\ndata: ")
    start_json = msgspec.json.decode(result.data.split(b"\n\n")[0].split(b"data: ", 1)[1])
    assert start_json["message"]["model"] == "claude-x"
    assert start_json["message"]["id"] == "msg_1"
    assert result.data.endswith(PING + BLOCK + DELTA)
    assert (result.events, result.first_delta, result.finished) == (4, True, False)
    assert step.usage.input_tokens == 11


def test_message_delta_and_stop_are_held_back() -> None:
    # The final reply carries both: the delta's usage gets the answer's cost_usd (docs/billing.md).
    step = new_step()
    step.step(frames(START))
    result = step.step(frames(STOP_BLOCK, MSG_DELTA, STOP))
    assert result.data == STOP_BLOCK
    assert result.stop == STOP
    assert result.delta == MSG_DELTA.split(b"data: ", 1)[1].rstrip(b"\n")
    assert result.finished
    assert step.usage.output_final == 3


def test_a_message_delta_is_held_across_reads() -> None:
    step = new_step()
    step.step(frames(START))
    held = step.step(frames(STOP_BLOCK, MSG_DELTA))
    assert held.data == STOP_BLOCK and not held.finished
    result = step.step(frames(STOP))
    assert result.data == b"" and result.stop == STOP
    assert result.delta is not None and b'"output_tokens":3' in result.delta


def test_a_stream_without_message_delta_ends_with_its_stop_alone() -> None:
    step = new_step()
    step.step(frames(START))
    result = step.step(frames(STOP))
    assert result.stop == STOP and result.delta is None


def test_nothing_after_message_stop_is_relayed() -> None:
    step = new_step()
    result = step.step(frames(START, STOP, DELTA))
    assert DELTA not in result.data
    assert result.stop == STOP


def test_error_event_stops_the_stream() -> None:
    step = new_step()
    step.step(frames(START, DELTA))
    result = step.step(frames(DELTA, ERROR))
    assert result.data == DELTA
    assert result.error is not None and result.error.type == "overloaded_error"
    assert result.finished


def test_error_before_anything_is_reported_with_no_data() -> None:
    result = new_step().step(frames(ERROR))
    assert result.data == b"" and result.error is not None


def test_unknown_event_is_counted_and_relayed_raw() -> None:
    step = new_step()
    step.step(frames(START))
    result = step.step(frames(UNKNOWN, b"data: {not json\n\n", DELTA))
    assert result.unknown == 2
    assert result.data == UNKNOWN + b"data: {not json\n\n" + DELTA


def test_before_message_start_pings_and_unknown_events_are_dropped() -> None:
    step = new_step()
    result = step.step(frames(PING, UNKNOWN))
    assert (result.data, result.unknown, result.finished) == (b"", 1, False)
    assert step.step(frames(START)).data.startswith(b"event: message_start")


def test_stream_not_opening_with_message_start_is_invalid() -> None:
    result = new_step().step(frames(DELTA, START))
    assert result.invalid and result.data == b""
    assert new_step().step(frames(STOP)).invalid


def test_comment_frames_are_dropped() -> None:
    step = new_step()
    step.step(frames(START))
    result = step.step(frames(b": keep-alive\n\n", DELTA))
    assert result.data == DELTA
    assert result.events == 1
