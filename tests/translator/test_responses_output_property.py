"""core.responses_stream against the official openai SDK's Responses stream accumulator.

Any valid Anthropic event sequence (support.anthropic_streams; web searches and cited text
included), cut into arbitrary reads,
must accumulate (with ``ResponseStreamState``, what ``client.responses.stream`` uses) into the
response object that core.anthropic_to_responses makes of the same answer non-streamed, and any
byte split of it must give the same output.
"""

from __future__ import annotations

import base64
import itertools
import json
from typing import Any

import msgspec
from ezat_translator.core.anthropic_to_responses import ResponseMeta, to_response
from ezat_translator.core.responses_stream import ResponsesStream
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types.responses import Response
from support.anthropic_streams import Transcript, reads_of, transcripts
from support.responses_sse import accumulate, plain, visible_seal

META = ResponseMeta(request_id="req_p", response_model="anthropic/claude-sonnet-5-5", created_at=1)


def comparable(response: Response) -> dict[str, Any]:
    """``plain`` with each call's arguments parsed: the stream relays the deployment's JSON text
    as it came (spacing included), the body's is re-encoded."""
    value = plain(response)
    for item in value["output"]:
        if item["type"] == "function_call":
            item["arguments"] = json.loads(item["arguments"])
    return value


@settings(max_examples=300, deadline=None)
@given(t=transcripts(searches=True), cuts=st.lists(st.integers(0, 60), max_size=20))
def test_the_sdk_accumulates_the_non_streamed_response(t: Transcript, cuts: list[int]) -> None:
    stream = ResponsesStream(META, visible_seal)
    out = b"".join(stream.feed(read) for read in reads_of(t.frames, cuts))
    assert stream.complete and not stream.done
    out += stream.finish() + stream.final()
    assert stream.done
    assert stream.ignored_events == 0

    final, _ = accumulate(out)
    body = to_response(msgspec.json.encode(t.body()), META, visible_seal)
    expected = Response.model_validate_json(body)
    assert final is not None
    assert comparable(final) == comparable(expected)
    assert final.output_text == "".join(t.texts)
    # A run of consecutive text blocks is one message item with one output_text part.
    messages = [i for i in final.output if i.type == "message"]
    assert [[p.text for p in m.content if p.type == "output_text"] for m in messages] == [
        [run] for run in t.runs
    ]
    assert [(i.call_id, i.name) for i in final.output if i.type == "function_call"] == [
        (tool_id, name) for tool_id, name, _ in t.tools
    ]
    assert stream.usage == msgspec.json.decode(body)["usage"]
    _searches_and_citations(final, t)


def _searches_and_citations(final: Response, t: Transcript) -> None:
    """One web_search_call per search, its id sealing the search and its result (what
    Anthropic wants back next turn); a url_citation per citation, spanning its text block's
    place in its message's one part."""
    calls = [i for i in final.output if i.type == "web_search_call"]
    assert [(c.status, c.action.type) for c in calls] == [("completed", "search")] * len(t.searches)
    assert [(c.action.query, [s.url for s in c.action.sources or []]) for c in calls] == [
        (query, urls) for _, query, urls in t.searches
    ]
    for call, (use_id, query, _) in zip(calls, t.searches, strict=True):
        assert call.id.startswith("ws_sealed:")
        use, result = json.loads(base64.b64decode(call.id[len("ws_sealed:") :]))
        assert use == {
            "type": "server_tool_use",
            "id": use_id,
            "name": "web_search",
            "input": {"query": query},
        }
        assert result["tool_use_id"] == use_id
    notes = [
        (a.start_index, a.end_index, a.url)
        for item in final.output
        if item.type == "message"
        for part in item.content
        if part.type == "output_text"
        for a in part.annotations
        if a.type == "url_citation"
    ]
    assert t.run_cited == notes


@settings(max_examples=100, deadline=None)
@given(t=transcripts(searches=True), cuts=st.lists(st.integers(0, 4000), max_size=30))
def test_any_byte_split_gives_the_same_output(t: Transcript, cuts: list[int]) -> None:
    sse = b"".join(t.frames)
    whole_stream = ResponsesStream(META, visible_seal)
    whole = whole_stream.feed(sse) + whole_stream.final()
    bounds = [0, *sorted(c for c in cuts if c < len(sse)), len(sse)]
    stream = ResponsesStream(META, visible_seal)
    split = b"".join(stream.feed(sse[a:b]) for a, b in itertools.pairwise(bounds))
    assert split + stream.final() == whole
