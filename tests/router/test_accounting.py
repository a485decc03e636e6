"""core.accounting: exact counts from usage objects, estimates from generated characters."""

from __future__ import annotations

import msgspec
import pytest
from ezat_common.envelopes import UsageRecord
from ezat_common.schemas.anthropic import AnyEvent, Usage, decode_event
from ezat_router.core.accounting import UsageAccumulator

BASE = UsageRecord(
    request_id="r1", key_id="k1", model="m", api="messages", stream=True, status="complete"
)


def ev(obj: object) -> AnyEvent:
    return decode_event(msgspec.json.encode(obj))


def start(**usage: object) -> AnyEvent:
    return ev({"type": "message_start", "message": {"id": "m", "model": "x", "usage": usage}})


def delta_text(text: str) -> AnyEvent:
    return ev(
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}
    )


def delta_thinking(text: str) -> AnyEvent:
    return ev(
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "thinking_delta", "thinking": text},
        }
    )


def delta_json(text: str) -> AnyEvent:
    return ev(
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": text},
        }
    )


def message_delta(**usage: object) -> AnyEvent:
    return ev({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": usage})


def test_complete_stream_uses_exact_counts() -> None:
    acc = UsageAccumulator()
    for event in [
        start(
            input_tokens=10,
            cache_read_input_tokens=100,
            cache_creation_input_tokens=20,
            output_tokens=1,
        ),
        delta_text("hello world"),
        message_delta(output_tokens=42),
    ]:
        acc.feed(event)
    rec = acc.record(BASE, "complete")
    assert (rec.input_tokens, rec.cache_read_tokens, rec.cache_write_5m_tokens) == (10, 100, 20)
    assert (rec.cache_write_1h_tokens, rec.output_tokens, rec.estimated) == (0, 42, False)
    assert rec.status == "complete"
    assert rec.request_id == "r1"


def test_later_non_null_values_win() -> None:
    acc = UsageAccumulator()
    acc.feed(start(input_tokens=10, cache_read_input_tokens=5))
    acc.feed(message_delta(input_tokens=12, output_tokens=7, cache_read_input_tokens=None))
    rec = acc.record(BASE, "complete")
    assert (rec.input_tokens, rec.cache_read_tokens, rec.output_tokens) == (12, 5, 7)


def test_cache_write_breakdown_splits_5m_and_1h() -> None:
    acc = UsageAccumulator()
    acc.feed(
        start(
            input_tokens=1,
            cache_creation_input_tokens=30,
            cache_creation={"ephemeral_5m_input_tokens": 10, "ephemeral_1h_input_tokens": 20},
        )
    )
    acc.feed(message_delta(output_tokens=1))
    rec = acc.record(BASE, "complete")
    assert (rec.cache_write_5m_tokens, rec.cache_write_1h_tokens) == (10, 20)


def test_closed_stream_estimates_output_from_text_thinking_and_tool_json() -> None:
    acc = UsageAccumulator()
    acc.feed(start(input_tokens=50, output_tokens=1))
    acc.feed(delta_thinking("a" * 10))
    acc.feed(delta_text("b" * 7))
    acc.feed(delta_json('{"x": 1}'))  # 8 characters
    assert acc.estimated_output() == 7  # ceil(25 / 4)
    rec = acc.record(BASE, "client_closed")
    assert rec.input_tokens == 50  # exact, from message_start
    assert rec.output_tokens == 7
    assert rec.reasoning_tokens == 3  # ceil(10 / 4)
    assert rec.estimated is True
    assert rec.status == "client_closed"


def test_output_already_final_is_exact_even_when_closed() -> None:
    acc = UsageAccumulator()
    acc.feed(start(input_tokens=5))
    acc.feed(delta_text("x" * 100))
    acc.feed(message_delta(output_tokens=9))
    rec = acc.record(BASE, "client_closed")
    assert (rec.output_tokens, rec.estimated) == (9, False)


def test_closed_before_message_start_is_free_whatever_the_body() -> None:
    # C5: the deployment reported nothing; the body (e.g. a 20 MB base64 image) is no measure of
    # input tokens. Formerly ceil(body bytes / 4) = millions of tokens were billed here.
    rec = UsageAccumulator().record(BASE, "client_closed")
    assert (rec.input_tokens, rec.output_tokens, rec.estimated) == (0, 0, True)
    assert (rec.cache_read_tokens, rec.cache_write_5m_tokens, rec.reasoning_tokens) == (0, 0, 0)


def test_closed_after_message_start_bills_the_reported_input() -> None:
    acc = UsageAccumulator()
    acc.feed(start(input_tokens=1500, cache_read_input_tokens=20))
    rec = acc.record(BASE, "client_closed")
    assert (rec.input_tokens, rec.cache_read_tokens, rec.estimated) == (1500, 20, True)


@pytest.mark.parametrize(
    ("reported", "thinking_chars", "output", "expected"),
    [
        (None, 40, 100, 10),  # estimated from thinking characters
        (None, 4000, 100, 100),  # an estimate is capped at the output
        (33, 0, 100, 33),  # a reported count wins
    ],
)
def test_reasoning_tokens(
    reported: int | None, thinking_chars: int, output: int, expected: int
) -> None:
    acc = UsageAccumulator()
    acc.feed(start(input_tokens=1))
    acc.feed(delta_thinking("t" * thinking_chars))
    acc.feed(message_delta(output_tokens=output, reasoning_tokens=reported))
    assert acc.record(BASE, "complete").reasoning_tokens == expected


def test_non_streamed_response_usage_and_content() -> None:
    acc = UsageAccumulator()
    acc.feed_usage(Usage(input_tokens=3, output_tokens=20), final=True)
    acc.feed_content([{"type": "thinking", "thinking": "x" * 16}, {"type": "text", "text": "hi"}])
    rec = acc.record(BASE, "complete")
    assert (rec.input_tokens, rec.output_tokens, rec.reasoning_tokens) == (3, 20, 4)
    assert rec.estimated is False


@pytest.mark.parametrize(("stop", "kept"), [("end_turn", "end_turn"), (None, None), (7, None)])
def test_a_non_streamed_response_gives_its_stop_reason(stop: object, kept: str | None) -> None:
    acc = UsageAccumulator()
    acc.feed_response(Usage(input_tokens=3, output_tokens=2), [], stop)
    assert acc.stop_reason == kept
    assert acc.record(BASE, "complete").output_tokens == 2


def test_error_type_is_carried() -> None:
    rec = UsageAccumulator().record(BASE, "failed", error_type="overloaded_error")
    assert (rec.status, rec.error_type) == ("failed", "overloaded_error")
