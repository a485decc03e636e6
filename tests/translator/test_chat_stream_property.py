"""core.chat_stream against the official openai SDK's stream accumulator.

Any valid Anthropic event sequence (web searches and cited text included), cut into arbitrary
reads, must accumulate (with ``ChatCompletionStreamState``, what ``client.chat.completions.stream``
uses) into the text, tool calls, citations, finish reason and usage the Anthropic stream
described, and end with one ``[DONE]``.
"""

from __future__ import annotations

import itertools
import json

import msgspec
from ezat_translator.core.anthropic_to_openai import to_chat_completion
from ezat_translator.core.chat_stream import ChatStream
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.lib.streaming.chat._completions import ChatCompletionStreamState
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from support.anthropic_streams import FINISH, Transcript, reads_of, transcripts


@settings(max_examples=300, deadline=None)
@given(
    t=transcripts(searches=True),
    include_usage=st.booleans(),
    cuts=st.lists(st.integers(0, 60), max_size=20),
)
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
    # Each citation spans its text block's place in the content, as the JSON answer says.
    notes = choice.message.annotations or []
    got = [
        (a.url_citation.start_index, a.url_citation.end_index, a.url_citation.url) for a in notes
    ]
    assert got == t.cited
    body, _ = to_chat_completion(
        msgspec.json.encode(t.body()), request_id="req_p", response_model="m", created=1
    )
    assert ChatCompletion.model_validate_json(body).choices[0].message.annotations == (
        notes or None
    )

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
