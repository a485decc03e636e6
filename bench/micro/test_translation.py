"""µs per request and per stream event of the translation core (pytest-benchmark).

Run by ``make bench`` (``bench/run.py``), never by ``make test`` (``testpaths`` is ``tests``):

    .venv/bin/pytest bench/micro --benchmark-only

Per request: ``prepare_create`` (the translator's whole work for an Anthropic request) and the
OpenAI translations both ways. Per stream event: ``decode_event``, ``SseParser.feed``, the
router's ``StreamStep.step`` and the OpenAI ``ChatStream.feed``, each on one text delta; plus one
whole 20-token stream through parser and step. The Bedrock kind's ``EventStreamParser`` is
measured beside ``SseParser`` on the same events as event-stream ``chunk`` messages (the
simulator's encoder, compact JSON as Bedrock sends it).
"""

from __future__ import annotations

import json

from conftest import delta_event, frame, stream_frames
from ezat_common.schemas.anthropic import decode_event
from ezat_common.sse import SseParser
from ezat_router.core.accounting import UsageAccumulator
from ezat_router.core.kinds.bedrock_answers import EventStreamParser
from ezat_router.core.stream import StreamStep
from ezat_simulator import eventstream
from ezat_translator.core.anthropic_to_openai import to_chat_completion
from ezat_translator.core.chat_stream import ChatStream
from ezat_translator.core.messages import prepare_create
from ezat_translator.core.openai_to_anthropic import to_messages_request

DELTA = frame(delta_event())
DELTA_DATA = DELTA.split(b"data: ", 1)[1].rstrip(b"\n")


def as_chunk(sse_frame: bytes) -> bytes:
    event = json.loads(sse_frame.split(b"data: ", 1)[1])
    message: bytes = eventstream.chunk(json.dumps(event, separators=(",", ":")).encode())
    return message


def test_prepare_create_per_request(benchmark, catalogue, request_body):  # type: ignore[no-untyped-def]
    result = benchmark(prepare_create, request_body, catalogue)
    assert result.stream


def test_decode_event_per_event(benchmark):  # type: ignore[no-untyped-def]
    benchmark(decode_event, DELTA_DATA)


def test_sse_parser_per_event(benchmark):  # type: ignore[no-untyped-def]
    parser = SseParser()
    frames = benchmark(parser.feed, DELTA)
    assert len(frames) == 1


def test_bedrock_event_stream_parser_per_event(benchmark):  # type: ignore[no-untyped-def]
    parser = EventStreamParser()
    parser.feed(as_chunk(stream_frames()[0]))  # the stream's header block is known by now
    frames = benchmark(parser.feed, as_chunk(DELTA))
    assert len(frames) == 1


def test_router_stream_step_per_event(benchmark):  # type: ignore[no-untyped-def]
    step = StreamStep("claude-sonnet-5-5", UsageAccumulator())
    step.step(SseParser().feed(stream_frames()[0]))  # message_start: the stream is open
    frames = SseParser().feed(DELTA)
    result = benchmark(step.step, frames)
    assert result.data == DELTA


def test_router_whole_stream_parse_and_step(benchmark):  # type: ignore[no-untyped-def]
    frames = stream_frames()

    def relay() -> None:
        parser = SseParser()
        step = StreamStep("claude-sonnet-5-5", UsageAccumulator())
        for raw in frames:  # one upstream read per event, as with a zero-latency deployment
            step.step(parser.feed(raw))

    benchmark(relay)


def test_openai_chat_stream_per_event(benchmark):  # type: ignore[no-untyped-def]
    stream = ChatStream(
        request_id="bench", response_model="claude-sonnet-5-5", created=0, include_usage=True
    )
    stream.feed(stream_frames()[0] + stream_frames()[1])
    out = benchmark(stream.feed, DELTA)
    assert b"w00" in out


def test_openai_response_per_request(benchmark, response_body):  # type: ignore[no-untyped-def]
    kw = {"request_id": "bench", "response_model": "claude-sonnet-5-5", "created": 0}
    body, _ = benchmark(to_chat_completion, response_body, **kw)
    assert b"chat.completion" in body


def test_openai_request_per_request(benchmark, catalogue):  # type: ignore[no-untyped-def]
    body = (
        b'{"model":"claude-sonnet-5-5","max_tokens":256,"stream":true,'
        b'"messages":[{"role":"system","content":"You are concise."},'
        b'{"role":"user","content":"Tell me about the quick brown fox."}]}'
    )
    result = benchmark(to_messages_request, body, catalogue, session_header=None, cache_header=None)
    assert result.stream


def test_router_whole_bedrock_stream_parse_and_step(benchmark):  # type: ignore[no-untyped-def]
    chunks = [as_chunk(raw) for raw in stream_frames()]

    def relay() -> None:
        parser = EventStreamParser()
        step = StreamStep("claude-sonnet-5-5", UsageAccumulator())
        for raw in chunks:  # one read per event, as test_router_whole_stream_parse_and_step
            step.step(parser.feed(raw))

    benchmark(relay)
