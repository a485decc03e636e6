"""core.chat_stream: Anthropic Messages SSE as OpenAI chat.completion.chunk SSE.

Golden transcripts under golden/chat_stream/<case>/: in.sse (what the deployment sent),
options.json (optional: {"include_usage": true}), out.sse (exactly what the client must read) and
kept.json (the thinking kept, only when there is some). UPDATE_GOLDEN=1 rewrites the expected
files; review each against the seed page (Streaming) and docs/api.md ("Streaming").
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from ezat_translator.core.chat_stream import DONE, ChatStream
from support.golden import assert_golden

GOLDEN = Path(__file__).parent / "golden" / "chat_stream"
CASES = sorted(p for p in GOLDEN.iterdir() if p.is_dir())
REQUEST_ID = "req_0123456789"
MODEL = "anthropic/claude-sonnet-5-5"
CREATED = 1793318400


def new_stream(include_usage: bool = False, **overrides: Any) -> ChatStream:
    options: dict[str, Any] = {
        "request_id": REQUEST_ID,
        "response_model": MODEL,
        "created": CREATED,
    }
    options.update(overrides)
    return ChatStream(include_usage=include_usage, **options)


def frames_of(sse: bytes) -> list[bytes]:
    return [part + b"\n\n" for part in sse.split(b"\n\n") if part]


def event(payload: dict[str, Any]) -> bytes:
    return (
        b"event: " + payload["type"].encode() + b"\ndata: " + msgspec.json.encode(payload) + b"\n\n"
    )


def chunks_of(out: bytes) -> list[dict[str, Any]]:
    """The JSON chunks of an OpenAI SSE output, checking the framing on the way."""
    assert out.endswith(b"\n\n")
    chunks = []
    for line in out.split(b"\n\n")[:-1]:
        assert line.startswith(b"data: "), line
        if line != b"data: [DONE]":
            chunks.append(msgspec.json.decode(line[6:]))
    return chunks


def case_options(case: Path) -> dict[str, Any]:
    path = case / "options.json"
    return json.loads(path.read_text()) if path.exists() else {}


# ---- goldens ----------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_stream_matches_golden(case: Path) -> None:
    stream = new_stream(**case_options(case))
    out = stream.feed((case / "in.sse").read_bytes()) + stream.finish()
    assert_golden(case / "out.sse", out.decode())
    kept = stream.kept_thinking
    kept_path = case / "kept.json"
    if kept is None:
        assert not kept_path.exists()
    else:
        encoded = msgspec.json.format(msgspec.json.encode(kept), indent=2).decode() + "\n"
        assert_golden(kept_path, encoded)


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_frame_by_frame_gives_the_same_bytes(case: Path) -> None:
    whole = new_stream(**case_options(case))
    expected = whole.feed((case / "in.sse").read_bytes())
    stream = new_stream(**case_options(case))
    out = b"".join(stream.feed(frame) for frame in frames_of((case / "in.sse").read_bytes()))
    assert out == expected


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_golden_output_validates_with_the_openai_sdk(case: Path) -> None:
    from openai.types.chat import ChatCompletionChunk

    out = (case / "out.sse").read_bytes()
    assert out.endswith(DONE)
    assert out.count(b"data: [DONE]") == 1
    for chunk in chunks_of(out):
        if "error" in chunk:
            continue
        parsed = ChatCompletionChunk.model_validate(chunk)
        assert parsed.id == f"chatcmpl-{REQUEST_ID}"
        assert parsed.object == "chat.completion.chunk"
        assert parsed.model == MODEL
        assert parsed.created == CREATED


# ---- sequence details ------------------------------------------------------------------------

START = event(
    {
        "type": "message_start",
        "message": {"id": "m", "usage": {"input_tokens": 3, "output_tokens": 1}},
    }
)
STOP = event({"type": "message_stop"})


def text_delta(text: str, index: int = 0) -> bytes:
    return event(
        {
            "type": "content_block_delta",
            "index": index,
            "delta": {"type": "text_delta", "text": text},
        }
    )


def message_delta(stop_reason: str | None, **usage: int) -> bytes:
    return event({"type": "message_delta", "delta": {"stop_reason": stop_reason}, "usage": usage})


def test_first_chunk_carries_the_role_and_an_empty_content() -> None:
    chunks = chunks_of(new_stream().feed(START))
    assert chunks == [
        {
            "id": f"chatcmpl-{REQUEST_ID}",
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": MODEL,
            "choices": [
                {
                    "index": 0,
                    "delta": {"role": "assistant", "content": ""},
                    "logprobs": None,
                    "finish_reason": None,
                }
            ],
        }
    ]


def test_without_include_usage_no_chunk_has_a_usage_key() -> None:
    out = new_stream().feed(
        START + text_delta("hi") + message_delta("end_turn", output_tokens=2) + STOP
    )
    chunks = chunks_of(out)
    assert all("usage" not in chunk for chunk in chunks)
    assert all(chunk["choices"] for chunk in chunks)


def test_with_include_usage_only_the_last_chunk_has_usage() -> None:
    out = new_stream(include_usage=True).feed(
        START + text_delta("hi") + message_delta("end_turn", output_tokens=2) + STOP
    )
    chunks = chunks_of(out)
    assert [chunk["usage"] for chunk in chunks[:-1]] == [None] * (len(chunks) - 1)
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"]["completion_tokens"] == 2
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-2]["choices"][0]["delta"] == {}


def test_usage_chunk_and_done_wait_for_message_stop() -> None:
    stream = new_stream(include_usage=True)
    out = stream.feed(START + text_delta("hi") + message_delta("end_turn", output_tokens=2))
    assert b"[DONE]" not in out
    assert all(chunk["choices"] for chunk in chunks_of(out))
    assert not stream.done
    assert stream.finish_reason == "stop"
    tail = stream.feed(STOP)
    assert stream.done
    assert tail.endswith(b"}\n\ndata: [DONE]\n\n")
    assert chunks_of(tail)[0]["choices"] == []


def test_failure_after_message_delta_sends_no_usage_chunk() -> None:
    stream = new_stream(include_usage=True)
    stream.feed(START + text_delta("hi") + message_delta("end_turn", output_tokens=2))
    out = stream.error(500, "billing could not record the request")
    assert out == (
        b'data: {"error":{"message":"billing could not record the request","type":"server_error",'
        b'"param":null,"code":"internal_error"}}\n\ndata: [DONE]\n\n'
    )
    assert stream.done
    assert stream.feed(STOP) == b""
    assert stream.error(500, "again") == b""


def test_error_maps_529_to_503() -> None:
    out = new_stream().error(529, "Overloaded")
    assert chunks_of(out) == [
        {
            "error": {
                "message": "Overloaded",
                "type": "server_error",
                "param": None,
                "code": "overloaded",
            }
        }
    ]


def test_anthropic_error_event_ends_the_stream() -> None:
    stream = new_stream(include_usage=True)
    error = event({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}})
    out = stream.feed(START + text_delta("a") + error + text_delta("b") + STOP)
    chunks = chunks_of(out)
    assert chunks[-1] == {
        "error": {
            "message": "slow down",
            "type": "rate_limit_error",
            "param": None,
            "code": "rate_limit_exceeded",
        }
    }
    assert out.endswith(b"data: [DONE]\n\n") and out.count(b"[DONE]") == 1
    assert stream.done


def test_finish_after_done_is_empty_and_a_cut_stream_is_an_error() -> None:
    complete = new_stream()
    complete.feed(START + message_delta("end_turn") + STOP)
    assert complete.finish() == b""
    cut = new_stream()
    cut.feed(START + text_delta("a"))
    out = cut.finish()
    assert chunks_of(out)[0]["error"]["type"] == "server_error"
    assert out.endswith(DONE)
    assert cut.finish() == b""


def test_empty_text_deltas_and_pings_produce_nothing() -> None:
    stream = new_stream()
    stream.feed(START)
    assert stream.feed(text_delta("") + event({"type": "ping"}) + b": comment\n\n") == b""


def test_unknown_events_are_counted_not_fatal() -> None:
    stream = new_stream()
    out = stream.feed(
        START
        + event({"type": "brand_new", "x": 1})
        + b"event: broken\ndata: {not json\n\n"
        + event({"type": "content_block_delta", "index": 0, "delta": {"type": "brand_new_delta"}})
        + text_delta("ok")
    )
    assert stream.ignored_events == 3
    assert chunks_of(out)[-1]["choices"][0]["delta"] == {"content": "ok"}


def test_frames_split_anywhere_give_the_same_output() -> None:
    sse = START + text_delta("héllo") + message_delta("max_tokens", output_tokens=9) + STOP
    expected = new_stream().feed(sse)
    stream = new_stream()
    out = b"".join(stream.feed(sse[i : i + 1]) for i in range(len(sse)))
    assert out == expected


def test_content_after_the_finish_chunk_is_dropped() -> None:
    out = new_stream().feed(START + message_delta("end_turn") + text_delta("late") + STOP)
    assert b"late" not in out


def test_missing_message_start_still_sends_the_role_chunk_first() -> None:
    chunks = chunks_of(new_stream().feed(text_delta("x") + STOP))
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert chunks[1]["choices"][0]["delta"] == {"content": "x"}
    assert chunks[2]["choices"][0]["finish_reason"] == "stop"


def test_input_counts_are_updated_by_message_delta() -> None:
    stream = new_stream(include_usage=True)
    start = event(
        {
            "type": "message_start",
            "message": {
                "usage": {
                    "input_tokens": 5,
                    "cache_read_input_tokens": 7,
                    "cache_creation_input_tokens": 11,
                    "output_tokens": 1,
                }
            },
        }
    )
    stream.feed(start + message_delta("end_turn", input_tokens=6, output_tokens=4) + STOP)
    usage = msgspec.to_builtins(stream.usage)
    assert usage == {
        "prompt_tokens": 24,
        "completion_tokens": 4,
        "total_tokens": 28,
        "prompt_tokens_details": {"cached_tokens": 7, "cache_write_tokens": 11},
        "completion_tokens_details": {"reasoning_tokens": 0},
    }


def test_special_characters_in_ids_and_model_are_escaped() -> None:
    chunks = chunks_of(new_stream(request_id='a"b', response_model="m\\x").feed(START))
    assert chunks[0]["id"] == 'chatcmpl-a"b'
    assert chunks[0]["model"] == "m\\x"
