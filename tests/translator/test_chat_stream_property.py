"""core.chat_stream against the official openai SDK's stream accumulator.

Any valid Anthropic event sequence, cut into arbitrary reads, must accumulate (with
``ChatCompletionStreamState``, what ``client.chat.completions.stream`` uses) into the text, tool
calls, finish reason and usage the Anthropic stream described, and end with one ``[DONE]``.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from typing import Any

import msgspec
from ezat_translator.core.chat_stream import ChatStream
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.lib.streaming.chat._completions import ChatCompletionStreamState
from openai.types.chat import ChatCompletionChunk

FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
    "pause_turn": "stop",
    "model_context_window_exceeded": "length",
    None: "stop",
    "not_yet_invented": "stop",
}

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


@dataclass
class Transcript:
    frames: list[bytes] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    tools: list[tuple[str, str, Any]] = field(default_factory=list)
    thinking: list[dict[str, Any]] = field(default_factory=list)
    thinking_chars: int = 0
    stop_reason: str | None = None
    input_tokens: int = 0
    cache_read: int = 0
    cache_write: int = 0
    output_tokens: int = 0
    reasoning_tokens: int | None = None


def event(payload: dict[str, Any]) -> bytes:
    return (
        b"event: " + payload["type"].encode() + b"\ndata: " + msgspec.json.encode(payload) + b"\n\n"
    )


def pieces(draw: st.DrawFn, text: str) -> list[str]:
    """``text`` cut at arbitrary places (empty pieces included, as deployments sometimes send)."""
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=5)))
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


@st.composite
def transcripts(draw: st.DrawFn) -> Transcript:
    t = Transcript()
    t.input_tokens = draw(st.integers(0, 10**6))
    t.cache_read = draw(st.integers(0, 10**6))
    t.cache_write = draw(st.integers(0, 10**6))
    start_usage = {
        "input_tokens": t.input_tokens,
        "cache_read_input_tokens": t.cache_read,
        "cache_creation_input_tokens": t.cache_write,
        "output_tokens": 1,
    }
    t.frames.append(
        event(
            {
                "type": "message_start",
                "message": {"id": "msg_1", "model": "m", "usage": start_usage},
            }
        )
    )
    kinds = draw(
        st.lists(st.sampled_from(["text", "tool", "thinking", "redacted", "ping"]), max_size=8)
    )
    index = 0
    for kind in kinds:
        if kind == "ping":
            t.frames.append(event({"type": "ping"}))
            continue
        if kind == "text":
            block: dict[str, Any] = {"type": "text", "text": ""}
            text = draw(st.text(max_size=40))
            deltas = [{"type": "text_delta", "text": p} for p in pieces(draw, text)]
            t.texts.append(text)
        elif kind == "tool":
            tool_id = draw(st.from_regex(r"toolu_[A-Za-z0-9]{1,10}", fullmatch=True)) + f"_{index}"
            name = draw(st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_-]{0,20}", fullmatch=True))
            arguments = draw(st.dictionaries(st.text(max_size=6), json_values, max_size=4))
            spaced = draw(st.booleans())
            encoded = (
                json.dumps(arguments, ensure_ascii=draw(st.booleans()))
                if spaced
                else msgspec.json.encode(arguments).decode()
            )
            block = {"type": "tool_use", "id": tool_id, "name": name, "input": {}}
            deltas = [
                {"type": "input_json_delta", "partial_json": p} for p in pieces(draw, encoded)
            ]
            t.tools.append((tool_id, name, arguments))
        elif kind == "thinking":
            block = {"type": "thinking", "thinking": "", "signature": ""}
            text = draw(st.text(max_size=40))
            signature = draw(st.text(alphabet="abcdef0123456789", max_size=16))
            deltas = [{"type": "thinking_delta", "thinking": p} for p in pieces(draw, text)]
            deltas.append({"type": "signature_delta", "signature": signature})
            t.thinking.append({"type": "thinking", "thinking": text, "signature": signature})
            t.thinking_chars += len(text)
        else:
            data = draw(st.text(alphabet="ABCDEFabcdef0123456789+/=", min_size=1, max_size=20))
            block = {"type": "redacted_thinking", "data": data}
            deltas = []
            t.thinking.append(dict(block))
        t.frames.append(
            event({"type": "content_block_start", "index": index, "content_block": block})
        )
        t.frames.extend(
            event({"type": "content_block_delta", "index": index, "delta": d}) for d in deltas
        )
        t.frames.append(event({"type": "content_block_stop", "index": index}))
        index += 1
    t.stop_reason = draw(st.sampled_from(list(FINISH)))
    t.output_tokens = draw(st.integers(0, 10**5))
    delta_usage: dict[str, Any] = {"output_tokens": t.output_tokens}
    if draw(st.booleans()):  # later input counts replace the ones of message_start
        t.input_tokens = draw(st.integers(0, 10**6))
        delta_usage["input_tokens"] = t.input_tokens
    if draw(st.booleans()):
        t.reasoning_tokens = draw(st.integers(0, 10**4))
        delta_usage["reasoning_tokens"] = t.reasoning_tokens
    t.frames.append(
        event(
            {"type": "message_delta", "delta": {"stop_reason": t.stop_reason}, "usage": delta_usage}
        )
    )
    t.frames.append(event({"type": "message_stop"}))
    return t


def reads_of(frames: list[bytes], cuts: list[int]) -> list[bytes]:
    """The frames regrouped into reads: every cut index starts a new read."""
    reads: list[bytes] = []
    current: list[bytes] = []
    for i, frame in enumerate(frames):
        if i in cuts and current:
            reads.append(b"".join(current))
            current = []
        current.append(frame)
    reads.append(b"".join(current))
    return reads


@settings(max_examples=300, deadline=None)
@given(t=transcripts(), include_usage=st.booleans(), cuts=st.lists(st.integers(0, 60), max_size=20))
def test_openai_sdk_accumulates_what_anthropic_sent(
    t: Transcript, include_usage: bool, cuts: list[int]
) -> None:
    stream = ChatStream(
        request_id="req_p",
        response_model="anthropic/claude-sonnet-5-5",
        created=1,
        include_usage=include_usage,
    )
    out = b"".join(stream.feed(read) for read in reads_of(t.frames, cuts)) + stream.finish()

    assert out.endswith(b"data: [DONE]\n\n")
    assert out.count(b"data: [DONE]") == 1
    assert stream.done
    assert stream.ignored_events == 0

    state: ChatCompletionStreamState[None] = ChatCompletionStreamState()
    lines = out.split(b"\n\n")[:-1]
    assert lines[-1] == b"data: [DONE]"
    chunks = []
    for line in lines[:-1]:
        assert line.startswith(b"data: ")
        raw = msgspec.json.decode(line[6:])
        assert ("usage" in raw) == include_usage
        chunk = ChatCompletionChunk.model_validate(raw)
        chunks.append(chunk)
        list(state.handle_chunk(chunk))

    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in chunks if c.choices].count(None) == len(
        [c for c in chunks if c.choices]
    ) - 1
    snapshot = state.current_completion_snapshot
    assert snapshot.id == "chatcmpl-req_p"
    (choice,) = snapshot.choices
    assert choice.message.role == "assistant"
    assert choice.message.content == "".join(t.texts)
    calls = choice.message.tool_calls or []
    assert [(c.id, c.type, c.function.name, json.loads(c.function.arguments)) for c in calls] == [
        (tool_id, "function", name, arguments) for tool_id, name, arguments in t.tools
    ]
    assert choice.finish_reason == FINISH[t.stop_reason]

    prompt = t.input_tokens + t.cache_read + t.cache_write
    reasoning = t.reasoning_tokens
    if reasoning is None:
        reasoning = min(-(-t.thinking_chars // 4), t.output_tokens)
    expected_usage = {
        "prompt_tokens": prompt,
        "completion_tokens": t.output_tokens,
        "total_tokens": prompt + t.output_tokens,
        "prompt_tokens_details": {
            "cached_tokens": t.cache_read,
            "cache_write_tokens": t.cache_write,
        },
        "completion_tokens_details": {"reasoning_tokens": reasoning},
    }
    assert msgspec.to_builtins(stream.usage) == expected_usage
    if include_usage:
        assert not chunks[-1].choices
        assert snapshot.usage is not None
        assert snapshot.usage.model_dump(exclude_none=True) == expected_usage
    else:
        assert snapshot.usage is None
        assert all(c.choices for c in chunks)

    if choice.finish_reason not in ("length", "content_filter"):  # the SDK raises on those two
        final = state.get_final_completion()
        assert final.choices[0].message.content == "".join(t.texts)

    kept = stream.kept_thinking
    if t.tools and t.thinking:
        assert kept is not None
        assert kept.tool_call_ids == [tool_id for tool_id, _, _ in t.tools]
        assert kept.blocks == t.thinking
    else:
        assert kept is None


@settings(max_examples=100, deadline=None)
@given(t=transcripts(), cuts=st.lists(st.integers(0, 4000), max_size=30))
def test_any_byte_split_gives_the_same_output(t: Transcript, cuts: list[int]) -> None:
    sse = b"".join(t.frames)
    whole = ChatStream(request_id="r", response_model="m", created=1, include_usage=True).feed(sse)
    bounds = [0, *sorted(c for c in cuts if c < len(sse)), len(sse)]
    stream = ChatStream(request_id="r", response_model="m", created=1, include_usage=True)
    assert b"".join(stream.feed(sse[a:b]) for a, b in itertools.pairwise(bounds)) == whole
