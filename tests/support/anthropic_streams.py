"""Anthropic Messages event streams, as deployments send them, for the translators' tests.

- ``event(payload)``: one SSE frame.
- ``anthropic_stream(body)``: the event stream of a Messages response body, each text, argument
  and thinking value sent in two pieces, as a deployment streams the same answer.

For property tests (Hypothesis; test_chat_stream_property.py, test_responses_output_property.py):
``transcripts()`` draws a valid stream: ``message_start``, text, tool_use, thinking and
redacted_thinking blocks (every value cut into arbitrary pieces, empty ones included, as
deployments sometimes send), pings, ``message_delta`` with any stop reason and ``message_stop``.
``FINISH`` is the documented table (docs/api.md) of each stop reason's OpenAI finish reason. A
``Transcript`` keeps its frames and what they said: the texts, the tool calls, the thinking
blocks, the counts, and ``blocks``, the answer's content as the same answer's non-streamed body
holds it (``body()``). ``reads_of`` regroups the frames into reads. ``transcripts(searches=True)``
also draws web searches (a ``server_tool_use`` block and its ``web_search_tool_result``) and text
blocks citing them (``citations_delta``s before the text), kept in ``searches`` and ``cited``;
consecutive text blocks (cited or not) are drawn too, their joined texts kept in ``runs``.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from typing import Any

import msgspec
from hypothesis import strategies as st

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
    blocks: list[dict[str, Any]] = field(default_factory=list)
    # Each search: (its server_tool_use id, the query, the result URLs).
    searches: list[tuple[str, str, list[str]]] = field(default_factory=list)
    # Each citation: (the cited text block's start in the joined text, its end, the URL).
    cited: list[tuple[int, int, str]] = field(default_factory=list)
    # Each run of consecutive text blocks joined (one Responses message), and each citation's
    # span in its run's text.
    runs: list[str] = field(default_factory=list)
    run_cited: list[tuple[int, int, str]] = field(default_factory=list)
    in_run: bool = False  # the last block was a text block

    def body(self) -> dict[str, Any]:
        """The same answer as a non-streamed Messages response body."""
        usage: dict[str, Any] = {
            "input_tokens": self.input_tokens,
            "cache_read_input_tokens": self.cache_read,
            "cache_creation_input_tokens": self.cache_write,
            "output_tokens": self.output_tokens,
        }
        if self.reasoning_tokens is not None:
            usage["reasoning_tokens"] = self.reasoning_tokens
        return {
            "type": "message",
            "role": "assistant",
            "content": self.blocks,
            "stop_reason": self.stop_reason,
            "usage": usage,
        }


def event(payload: dict[str, Any]) -> bytes:
    kind: str = payload["type"]
    return b"event: " + kind.encode() + b"\ndata: " + msgspec.json.encode(payload) + b"\n\n"


def _halves(text: str) -> list[str]:
    cut = len(text) // 2
    return [p for p in (text[:cut], text[cut:]) if p]


def anthropic_stream(body: dict[str, Any]) -> bytes:
    usage = dict(body.get("usage", {}))
    output_tokens = usage.pop("output_tokens", 0)
    frames = [
        event(
            {
                "type": "message_start",
                "message": {
                    "id": body.get("id", "msg_1"),
                    "type": "message",
                    "role": "assistant",
                    "model": body.get("model", "m"),
                    "content": [],
                    "stop_reason": None,
                    "usage": {**usage, "output_tokens": 1},
                },
            }
        )
    ]
    for index, block in enumerate(body["content"]):
        kind = block["type"]
        deltas: list[dict[str, Any]] = []
        if kind == "text":
            start: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [
                {"type": "citations_delta", "citation": c} for c in block.get("citations") or ()
            ]
            deltas += [{"type": "text_delta", "text": p} for p in _halves(block["text"])]
        elif kind in ("tool_use", "server_tool_use"):
            start = {**block, "input": {}}
            arguments = msgspec.json.encode(block["input"]).decode()
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in _halves(arguments)]
        elif kind == "thinking":
            start = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": p} for p in _halves(block["thinking"])]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        else:
            start = block
        frames.append(
            event({"type": "content_block_start", "index": index, "content_block": start})
        )
        frames.extend(
            event({"type": "content_block_delta", "index": index, "delta": d}) for d in deltas
        )
        frames.append(event({"type": "content_block_stop", "index": index}))
    frames.append(
        event(
            {
                "type": "message_delta",
                "delta": {"stop_reason": body.get("stop_reason"), "stop_sequence": None},
                "usage": {"output_tokens": output_tokens},
            }
        )
    )
    frames.append(event({"type": "message_stop"}))
    return b"".join(frames)


def pieces(draw: st.DrawFn, text: str) -> list[str]:
    """``text`` cut at arbitrary places (empty pieces included, as deployments sometimes send)."""
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=5)))
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


_urls = st.from_regex(r"https://[a-z]{1,8}\.example/[a-z0-9]{0,6}", fullmatch=True)


def _citations(draw: st.DrawFn, t: Transcript) -> list[dict[str, Any]]:
    urls = [u for _, _, found in t.searches for u in found]
    if not urls:
        return []
    return [
        {
            "type": "web_search_result_location",
            "url": url,
            "title": draw(st.text(max_size=12)),
            "encrypted_index": draw(st.text(alphabet="ABCDEF0123", min_size=1, max_size=8)),
            "cited_text": draw(st.text(max_size=20)),
        }
        for url in [draw(st.sampled_from(urls)) for _ in range(draw(st.integers(0, 3)))]
    ]


def _search(draw: st.DrawFn, t: Transcript, index: int) -> int:
    """A search (server_tool_use, its input in pieces) and its result: two blocks."""
    t.in_run = False
    use_id = f"srvtoolu_{index}"
    query = draw(st.text(max_size=30))
    urls = draw(st.lists(_urls, min_size=draw(st.integers(0, 1)), max_size=3))
    encoded = msgspec.json.encode({"query": query}).decode()
    results = [
        {
            "type": "web_search_result",
            "url": url,
            "title": draw(st.text(max_size=12)),
            "encrypted_content": draw(st.text(alphabet="ABCDEFabcdef0123", max_size=24)),
            "page_age": None,
        }
        for url in urls
    ]
    use = {"type": "server_tool_use", "id": use_id, "name": "web_search", "input": {}}
    result = {"type": "web_search_tool_result", "tool_use_id": use_id, "content": results}
    deltas = [{"type": "input_json_delta", "partial_json": p} for p in pieces(draw, encoded)]
    t.frames.append(event({"type": "content_block_start", "index": index, "content_block": use}))
    t.frames.extend(
        event({"type": "content_block_delta", "index": index, "delta": d}) for d in deltas
    )
    t.frames.append(event({"type": "content_block_stop", "index": index}))
    t.frames.append(
        event({"type": "content_block_start", "index": index + 1, "content_block": result})
    )
    t.frames.append(event({"type": "content_block_stop", "index": index + 1}))
    t.blocks += [{**use, "input": {"query": query}}, result]
    t.searches.append((use_id, query, urls))
    return index + 2


@st.composite
def transcripts(draw: st.DrawFn, searches: bool = False) -> Transcript:
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
    choices = ["text", "tool", "thinking", "redacted", "ping"] + (["search", "cited"] * searches)
    kinds = draw(st.lists(st.sampled_from(choices), max_size=8))
    index = 0
    for kind in kinds:
        if kind == "ping":
            t.frames.append(event({"type": "ping"}))
            continue
        if kind in ("search", "cited"):  # cited: a search, then text that may cite it
            index = _search(draw, t, index)
            if kind == "search":
                continue
            kind = "text"
        if kind == "text":
            block: dict[str, Any] = {"type": "text", "text": ""}
            text = draw(st.text(max_size=40))
            citations = _citations(draw, t) if searches else []
            deltas = [{"type": "citations_delta", "citation": c} for c in citations]
            deltas += [{"type": "text_delta", "text": p} for p in pieces(draw, text)]
            start = sum(len(x) for x in t.texts)
            t.cited += [(start, start + len(text), c["url"]) for c in citations]
            t.texts.append(text)
            if not t.in_run:
                t.runs.append("")
            at = len(t.runs[-1])
            t.run_cited += [(at, at + len(text), c["url"]) for c in citations]
            t.runs[-1] += text
            t.blocks.append({"type": "text", "text": text})
            if citations:
                t.blocks[-1]["citations"] = citations
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
            t.blocks.append({"type": "tool_use", "id": tool_id, "name": name, "input": arguments})
        elif kind == "thinking":
            block = {"type": "thinking", "thinking": "", "signature": ""}
            text = draw(st.text(max_size=40))
            signature = draw(st.text(alphabet="abcdef0123456789", max_size=16))
            deltas = [{"type": "thinking_delta", "thinking": p} for p in pieces(draw, text)]
            deltas.append({"type": "signature_delta", "signature": signature})
            t.thinking.append({"type": "thinking", "thinking": text, "signature": signature})
            t.blocks.append(dict(t.thinking[-1]))
            t.thinking_chars += len(text)
        else:
            data = draw(st.text(alphabet="ABCDEFabcdef0123456789+/=", min_size=1, max_size=20))
            block = {"type": "redacted_thinking", "data": data}
            deltas = []
            t.thinking.append(dict(block))
            t.blocks.append(dict(block))
        t.in_run = kind == "text"
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
