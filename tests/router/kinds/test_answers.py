"""core.kinds.bedrock_answers: Bedrock's event stream reads as the Anthropic SSE stream it
carries, and its exceptions end the stream as the Anthropic API's error events do.

Frames come from the simulator's Bedrock face (its ``EventStreamResponse`` turns the engine's
SSE events into event-stream messages exactly as it serves them), so the equivalent SSE is the
Anthropic face's answer to the same request.
"""

from __future__ import annotations

import base64
import itertools
from typing import Any

import msgspec
import pytest
from botocore.eventstream import EventStreamBuffer
from ezat_common.sse import Frame, SseError, SseParser
from ezat_router.core.accounting import UsageAccumulator
from ezat_router.core.health import FAULT_COOLDOWN
from ezat_router.core.kinds.bedrock_answers import EventStreamParser, count_tokens_answer
from ezat_router.core.stream import StepResult, StreamStep
from ezat_router.core.upstream_errors import from_stream_error
from ezat_simulator import engine, eventstream, sse
from ezat_simulator.bedrock_stream import EventStreamResponse, _stream_failure
from ezat_simulator.bedrock_wire import BedrockError, stream_member
from ezat_simulator.cache import NO_CACHE
from hypothesis import given, settings
from hypothesis import strategies as st

MODEL = "anthropic/claude-sonnet-5-5"
COOLDOWN = 7.0
TOOLS = [{"name": "get_weather", "input_schema": {"type": "object", "properties": {}}}]
PROMPTS = {
    "text": ("[sim:tokens=20]", {}),
    "thinking": ("[sim:think=6 tokens=5]", {}),
    "tool_use": ("[sim:tool=get_weather tokens=3]", {"tools": TOOLS}),
}


def simulated(prompt: str, extra: dict[str, Any]) -> tuple[bytes, bytes]:
    """The Anthropic face's SSE answer to ``prompt`` and the Bedrock face's event stream."""
    req = {
        "model": "us.anthropic.claude-sonnet-5-5-v1:0",
        "max_tokens": 256,
        "messages": [{"role": "user", "content": prompt}],
        **extra,
    }
    directives, seed = engine.read_directives(req)
    plan = engine.plan_reply(req, directives, seed, seq=1, input_tokens=40, cache=NO_CACHE)
    events = [data for _, data, _ in sse.stream_steps(plan)]
    face = EventStreamResponse(plan, None)
    return b"".join(events), b"".join(face._frame(event) for event in events)


def relayed(frames: list[Frame]) -> StepResult:
    return StreamStep(MODEL, UsageAccumulator()).step(frames)


def fed(parser: EventStreamParser | SseParser, parts: list[bytes]) -> list[Frame]:
    return [frame for part in parts for frame in parser.feed(part)]


# ---- chunks read as the SSE parser reads the same events ---------------------------------------


@pytest.mark.parametrize("case", sorted(PROMPTS))
def test_a_bedrock_stream_gives_the_frames_of_its_sse_stream(case: str) -> None:
    sse_bytes, bedrock = simulated(*PROMPTS[case])
    expected = SseParser().feed(sse_bytes)
    assert EventStreamParser().feed(bedrock) == expected
    assert [f.event for f in expected][-1] == b"message_stop"


def test_message_stop_reaches_the_client_as_the_anthropic_api_sends_it() -> None:
    _, bedrock = simulated(*PROMPTS["text"])
    buffer = EventStreamBuffer()
    buffer.add_data(bedrock)
    last = base64.b64decode(msgspec.json.decode(list(buffer)[-1].payload)["bytes"])
    assert last.startswith(b'{"type":"message_stop","amazon-bedrock-invocationMetrics":{')
    result = relayed(EventStreamParser().feed(bedrock))
    assert result.stop == b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
    assert b"amazon-bedrock" not in result.data
    assert (result.events, result.unknown) == (25, 0)  # 20 text deltas and 5 other events


def test_every_split_of_a_stream_gives_the_same_frames() -> None:
    sse_bytes, bedrock = simulated("[sim:tokens=3]", {})
    expected = SseParser().feed(sse_bytes)
    for cut in range(len(bedrock) + 1):
        assert fed(EventStreamParser(), [bedrock[:cut], bedrock[cut:]]) == expected, cut
    assert fed(EventStreamParser(), [bedrock[i : i + 1] for i in range(len(bedrock))]) == expected


@settings(max_examples=200, deadline=None)
@given(case=st.sampled_from(sorted(PROMPTS)), cuts=st.lists(st.integers(0, 10_000), max_size=12))
def test_any_splits_of_a_stream_give_the_same_frames(case: str, cuts: list[int]) -> None:
    sse_bytes, bedrock = simulated(*PROMPTS[case])
    bounds = [0, *sorted(c % (len(bedrock) + 1) for c in cuts), len(bedrock)]
    parts = [bedrock[a:b] for a, b in itertools.pairwise(bounds)]
    parser = EventStreamParser()
    assert fed(parser, parts) == SseParser().feed(sse_bytes)
    assert parser.pending == 0


def test_an_incomplete_message_is_held_back_until_it_completes() -> None:
    message = eventstream.chunk(b'{"type":"ping"}')
    parser = EventStreamParser()
    assert parser.feed(message[:-1]) == []
    assert parser.pending == len(message) - 1
    assert parser.feed(message[-1:]) == [Frame(b"ping", b'{"type":"ping"}', sse.PING)]


def test_a_chunk_not_starting_with_its_type_is_named_by_its_type() -> None:
    event = b'{"index":0,"type":"content_block_stop"}'
    frames = EventStreamParser().feed(eventstream.chunk(event))
    assert frames == SseParser().feed(b"event: content_block_stop\ndata: " + event + b"\n\n")


def test_a_pretty_printed_chunk_is_relayed_as_one_data_line() -> None:
    frames = EventStreamParser().feed(eventstream.chunk(b'{\n  "type": "ping"\n}'))
    assert frames == [Frame(b"ping", b'{"type":"ping"}', sse.PING)]


def test_unknown_messages_are_counted_and_never_relayed() -> None:
    start, _ = simulated("[sim:tokens=1]", {})
    other = eventstream.message(
        eventstream.headers_block([(":event-type", "metadata"), (":message-type", "event")]),
        b'{"type":"ping"}',
    )
    not_json = eventstream.chunk(b"\nevent: message_stop\n\n")
    frames = SseParser().feed(start.split(b"\n\n", 1)[0] + b"\n\n")  # message_start
    frames += EventStreamParser().feed(other + not_json)
    result = relayed(frames)
    assert result.unknown == 2 and result.stop is None and not result.finished
    assert result.data.count(b"event: ") == 1  # message_start only


# ---- exceptions end the stream as the API's error events do --------------------------------------

# (the exception, what the client is told, and whether another deployment is tried before the
# first byte / the deployment rests / counts a fault)
EXCEPTIONS = [
    ("ThrottlingException", 429, "rate_limit_error", "429", True, True, False),
    ("ModelStreamErrorException", 500, "api_error", "5xx", True, False, True),
    ("InternalServerException", 500, "api_error", "5xx", True, False, True),
    ("ServiceUnavailableException", 529, "overloaded_error", "529", True, False, True),
    ("ValidationException", 400, "invalid_request_error", "4xx", False, False, False),
    ("ModelTimeoutException", 504, "timeout_error", "5xx", True, False, True),
]


@pytest.mark.parametrize(
    ("error_type", "status", "kind", "reason", "retryable", "limited", "fault"),
    EXCEPTIONS,
    ids=[row[0] for row in EXCEPTIONS],
)
def test_a_stream_exception_fails_the_attempt_as_its_table_row_says(
    error_type: str,
    status: int,
    kind: str,
    reason: str,
    retryable: bool,
    limited: bool,
    fault: bool,
) -> None:
    err = BedrockError(error_type)
    frames = EventStreamParser().feed(
        eventstream.exception(stream_member(error_type), {"message": err.message})
    )
    result = relayed(frames)
    assert result.error is not None and result.data == b""
    failure = from_stream_error(result.error, cooldown_default=COOLDOWN)
    assert (failure.error.status, failure.error.type) == (status, kind)
    assert failure.error.message == err.message  # Bedrock's words, as the API's are relayed
    assert (failure.reason, failure.retryable) == (reason, retryable)
    assert (failure.rate_limited, failure.fault) == (limited, fault)
    assert failure.error.retry_after == (
        COOLDOWN if limited else FAULT_COOLDOWN if status == 529 else None
    )


def test_the_models_own_overload_mid_stream_is_an_overload() -> None:
    """A modelStreamErrorException carrying the model's 529 (the simulator's default failure)."""
    _, bedrock = simulated("[sim:tokens=4]", {})
    head = bedrock[: bedrock.index(eventstream.chunk(b'{"type":"content_block_stop","index":0}'))]
    frames = EventStreamParser().feed(head + eventstream.exception(*_stream_failure(None)))
    result = relayed(frames)
    assert result.first_delta and result.data.count(b"event: content_block_delta") == 4
    assert result.error is not None
    failure = from_stream_error(result.error, cooldown_default=COOLDOWN)
    assert (failure.error.status, failure.error.type, failure.reason) == (
        529,
        "overloaded_error",
        "529",
    )
    assert failure.error.message == "The model stream returned an error."


def test_an_event_stream_protocol_error_is_a_server_error() -> None:
    headers = eventstream.headers_block(
        [
            (":message-type", "error"),
            (":error-code", "InternalFailure"),
            (":error-message", "stream reset"),
        ]
    )
    result = relayed(EventStreamParser().feed(eventstream.message(headers, b"")))
    assert result.error is not None
    failure = from_stream_error(result.error, cooldown_default=COOLDOWN)
    assert (failure.error.status, failure.error.message, failure.fault) == (
        500,
        "stream reset",
        True,
    )


# ---- what is not an event stream -------------------------------------------------------------


def _bad_crc(message: bytes) -> bytes:
    return message[:-1] + bytes([message[-1] ^ 1])


GARBAGE = {
    "html": b"<!DOCTYPE html>\n<html><body>Sign in to continue</body></html>\n",
    "sse": sse.PING * 2,
    "message_crc": _bad_crc(eventstream.chunk(b'{"type":"ping"}')),
    "prelude_crc": b"\x00\x00\x00\x20\x00\x00\x00\x00" + b"\x00" * 28,
    "header_type": eventstream.message(b"\x01a\x0a", b""),
    "header_name": eventstream.message(b"\x02\xff\xfe\x07\x00\x00", b""),
}


@pytest.mark.parametrize("case", sorted(GARBAGE))
def test_garbage_is_an_sse_error(case: str) -> None:
    with pytest.raises(SseError, match=r"^not an AWS event stream: "):
        fed(EventStreamParser(), [GARBAGE[case]])


def test_a_message_longer_than_the_limit_is_an_sse_error() -> None:
    big = eventstream.chunk(msgspec.json.encode({"type": "ping", "pad": "x" * 4096}))
    parser = EventStreamParser(max_frame=4096)
    assert parser.feed(big[:4000]) == []
    with pytest.raises(SseError, match=r"^an event exceeds 4096 bytes$"):
        parser.feed(big[4000:4100])


@pytest.mark.parametrize(
    ("body", "answer"),
    [
        (b'{"inputTokens":42}', b'{"input_tokens":42}'),
        (b'{ "inputTokens" : 7, "extra": 1 }', b'{"input_tokens":7}'),
        (b'{"message":"no count"}', b'{"message":"no count"}'),
        (b"not json", b"not json"),
    ],
)
def test_bedrock_count_tokens_answers_in_the_anthropic_shape(body: bytes, answer: bytes) -> None:
    assert count_tokens_answer(body) == answer
