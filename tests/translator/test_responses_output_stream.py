"""core.responses_stream: Anthropic Messages SSE as OpenAI Responses API events.

Each case of golden/responses_output/ is streamed as a deployment would send it
(``support.anthropic_streams.anthropic_stream``); out.sse is exactly what the client must read, and
the openai SDK's own accumulator must read it back as the non-streamed translation of the same
answer (out.json). UPDATE_GOLDEN=1 rewrites out.sse; review it against docs/responses.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from ezat_translator.core.anthropic_to_responses import ResponseMeta, to_response
from ezat_translator.core.responses_stream import ResponsesStream
from openai.types.responses import Response
from support.anthropic_streams import anthropic_stream
from support.anthropic_streams import event as anthropic_event
from support.golden import assert_golden
from support.responses_sse import accumulate, plain, responses_events, visible_seal

from .responses_output_support import case_meta

GOLDEN = Path(__file__).parent / "golden" / "responses_output"
CASES = sorted(p for p in GOLDEN.iterdir() if p.is_dir())
META = ResponseMeta(
    request_id="req_0123456789", response_model="anthropic/claude-sonnet-5-5", created_at=1793318400
)

KNOWN_BLOCKS = {
    "text",
    "tool_use",
    "thinking",
    "redacted_thinking",
    "server_tool_use",
    "web_search_tool_result",
}
START = anthropic_event(
    {
        "type": "message_start",
        "message": {"id": "msg_1", "model": "m", "usage": {"input_tokens": 9, "output_tokens": 1}},
    }
)
TEXT = (
    anthropic_event(
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
    )
    + anthropic_event(
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}}
    )
    + anthropic_event({"type": "content_block_stop", "index": 0})
)
END = anthropic_event(
    {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 4}}
) + anthropic_event({"type": "message_stop"})


def streamed(sse: bytes, meta: ResponseMeta = META) -> tuple[ResponsesStream, bytes]:
    """The stream and all it wrote, ``final`` included (its usage record is durable)."""
    stream = ResponsesStream(meta, visible_seal)
    out = stream.feed(sse)
    out += stream.final() + stream.finish()
    return stream, out


def types_of(out: bytes) -> list[str]:
    return [e["type"] for e in responses_events(out)]


# ---- goldens and the SDK --------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_stream_matches_golden(case: Path) -> None:
    body = json.loads((case / "in.json").read_text())
    _, out = streamed(anthropic_stream(body), case_meta(case))
    assert_golden(case / "out.sse", out.decode())


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_the_sdk_accumulates_the_non_streamed_response(case: Path) -> None:
    body = json.loads((case / "in.json").read_text())
    stream, out = streamed(anthropic_stream(body), case_meta(case))
    final, state = accumulate(out)
    expected = Response.model_validate_json(
        to_response(msgspec.json.encode(body), case_meta(case), visible_seal)
    )
    assert final is not None
    assert plain(final) == plain(expected)
    assert final.output_text == expected.output_text
    assert stream.done
    # A block of a type the stream does not know (container_upload) is counted and skipped.
    assert stream.ignored_events == sum(b["type"] not in KNOWN_BLOCKS for b in body["content"])
    # What the deltas built up is what the items say when done.
    snapshot = state._ResponseStreamState__current_snapshot  # type: ignore[attr-defined]
    assert [_built(i) for i in snapshot.output] == [_built(i) for i in expected.output]


def _built(item: Any) -> tuple[str, str | None]:
    if item.type == "message":
        return item.type, "".join(part.text for part in item.content)
    return item.type, getattr(item, "arguments", None)


def test_the_event_sequence_of_a_text_answer() -> None:
    _, out = streamed(START + TEXT + END)
    assert types_of(out) == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]


def test_the_event_sequence_of_a_tool_call() -> None:
    tool = anthropic_event(
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}},
        }
    ) + anthropic_event({"type": "content_block_stop", "index": 0})
    _, out = streamed(START + tool + END)
    events = responses_events(out)
    assert [e["type"] for e in events][2:] == [
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    # A call whose arguments came in no piece gets one, so the pieces add up to the arguments.
    assert events[3]["delta"] == events[4]["arguments"] == "{}"


# ---- the final event is held ----------------------------------------------------------------


def test_the_final_event_waits_for_final() -> None:
    stream = ResponsesStream(META)
    out = stream.feed(START + TEXT + END)
    assert "response.completed" not in types_of(out)
    assert stream.complete and not stream.done
    assert stream.finish() == b""  # the end of input does not release it either
    final = stream.final()
    (event,) = responses_events(final, first=8)
    assert event["type"] == "response.completed"
    assert event["response"]["usage"]["total_tokens"] == 13
    assert stream.done
    assert stream.final() == b"" and stream.error(500, "late") == b""


def test_final_before_message_stop_gives_nothing() -> None:
    stream = ResponsesStream(META)
    stream.feed(START + TEXT)
    assert stream.final() == b""
    assert not stream.done


def test_billing_failing_after_message_stop_fails_the_response_instead() -> None:
    stream = ResponsesStream(META)
    out = stream.feed(START + TEXT + END)
    out += stream.error(500, "the usage could not be recorded; retry")
    final, _ = accumulate(out)
    assert final is not None
    assert final.status == "failed"
    assert final.usage is None  # not billed
    assert final.output_text == "Hi"
    assert stream.final() == b""


# ---- failures -------------------------------------------------------------------------------

FAILURES: list[tuple[str, bytes, dict[str, Any]]] = [
    (
        "deployment overloaded",
        anthropic_event(
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
        ),
        {"code": "server_error", "message": "Overloaded", "type": "server_error"},
    ),
    (
        "rate limited",
        anthropic_event(
            {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}
        ),
        {"code": "rate_limit_exceeded", "message": "slow down", "type": "rate_limit_error"},
    ),
    (
        "invalid request",
        anthropic_event(
            {"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}}
        ),
        {"code": "invalid_prompt", "message": "bad", "type": "invalid_request_error"},
    ),
    (
        "stream cut",
        b"",
        {
            "code": "server_error",
            "message": "the model's response stream ended before it was complete",
            "type": "server_error",
        },
    ),
]


@pytest.mark.parametrize(("tail", "error"), [c[1:] for c in FAILURES], ids=[c[0] for c in FAILURES])
def test_a_failure_mid_stream_is_response_failed(tail: bytes, error: dict[str, Any]) -> None:
    stream = ResponsesStream(META)
    out = stream.feed(START + TEXT + tail) + stream.finish()
    events = responses_events(out)
    assert events[-1]["type"] == "response.failed"
    response = events[-1]["response"]
    assert response["error"] == error
    assert response["status"] == "failed"
    assert response["usage"] is None
    final, _ = accumulate(out)
    assert final is not None and final.output_text == "Hi"
    assert stream.done
    assert stream.feed(END) == b"" and stream.final() == b""


def test_529_is_told_as_503() -> None:
    stream = ResponsesStream(META)
    stream.feed(START)
    (event,) = responses_events(stream.error(529, "busy"), first=2)
    assert event["response"]["error"]["type"] == "server_error"


def test_an_error_before_message_start_still_starts_the_response() -> None:
    stream = ResponsesStream(META)
    out = stream.error(504, "upstream timed out")
    assert types_of(out) == ["response.created", "response.in_progress", "response.failed"]
    final, _ = accumulate(out)
    assert final is not None and final.status == "failed"


def test_pings_and_unknown_events_give_nothing() -> None:
    stream = ResponsesStream(META)
    stream.feed(START)
    assert stream.feed(anthropic_event({"type": "ping"}) + b": keep-alive\n\n") == b""
    assert stream.feed(anthropic_event({"type": "not_yet_invented"})) == b""
    assert stream.ignored_events == 1


def test_thinking_text_is_never_sent_in_clear() -> None:
    thinking = (
        anthropic_event(
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "thinking", "thinking": "", "signature": ""},
            }
        )
        + anthropic_event(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "thinking_delta", "thinking": "secret plan"},
            }
        )
        + anthropic_event(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "signature_delta", "signature": "sig"},
            }
        )
        + anthropic_event({"type": "content_block_stop", "index": 0})
    )
    stream = ResponsesStream(META)  # no seal
    out = stream.feed(START + thinking + END) + stream.final()
    assert b"secret plan" not in out
    assert stream.usage["output_tokens_details"] == {"reasoning_tokens": 3}
    sealed = ResponsesStream(META, visible_seal)
    out = sealed.feed(START + thinking + END) + sealed.final()
    (done,) = [e for e in responses_events(out) if e["type"] == "response.output_item.done"]
    assert done["item"]["encrypted_content"] == visible_seal(
        [{"type": "thinking", "thinking": "secret plan", "signature": "sig"}]
    )
