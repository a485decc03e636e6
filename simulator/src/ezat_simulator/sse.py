"""Server-sent event encoding of a plan, in Anthropic's exact event order (pure).

``stream_steps(plan)`` yields ``(kind, bytes, tokens)`` for every event:

message_start, then per block content_block_start, its deltas (text_delta per token;
thinking_delta per token then one signature_delta; input_json_delta in 2-3 pieces; a cited
text block's citations_delta before its text), content_block_stop (a web search is two blocks:
``server_tool_use`` with its query's input_json_delta, then ``web_search_tool_result`` whole in
its start); then message_delta (stop reason and the final usage) and message_stop.

``kind`` tells the writer where to pause and where faults strike: ``TOKEN`` is a thinking/text
delta (one content token), ``PIECE`` a tool-input delta, ``FINAL`` the message_delta (a pending
mid-stream failure fires before it), ``PLAIN`` anything else. ``tokens`` is how many output
tokens the event completes, for the request log's ``tokens_sent``.

Every constant piece is encoded once; a text delta for a known (block, token) pair is a dict hit.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec

from .engine import Plan, TextPart, ThinkingPart, ToolPart
from .websearch import SearchPart

PLAIN, TOKEN, PIECE, FINAL = range(4)
Step = tuple[int, bytes, int]

_encode = msgspec.json.encode
CONTENT_TYPE = "text/event-stream; charset=utf-8"


def frame(event: str, data: bytes) -> bytes:
    return b"event: " + event.encode() + b"\ndata: " + data + b"\n\n"


def event(payload: dict[str, Any]) -> bytes:
    """One frame whose event name is the payload's ``type``."""
    return frame(payload["type"], _encode(payload))


MESSAGE_STOP = event({"type": "message_stop"})
PING = event({"type": "ping"})

# (delta type, block index, piece) -> encoded frame; pieces come from a 64-word vocabulary.
_DELTAS: dict[tuple[str, int, str], bytes] = {}
_DELTA_FIELD = {
    "text_delta": "text",
    "thinking_delta": "thinking",
    "input_json_delta": "partial_json",
}
_STARTS: dict[tuple[str, int], bytes] = {}
_STOPS: dict[int, bytes] = {}


def delta(kind: str, index: int, piece: str) -> bytes:
    key = (kind, index, piece)
    data = _DELTAS.get(key)
    if data is None:
        data = event(
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": kind, _DELTA_FIELD[kind]: piece},
            }
        )
        if kind != "input_json_delta":  # tool JSON pieces are arbitrary: do not keep them
            _DELTAS[key] = data
    return data


def _start(kind: str, index: int) -> bytes:
    data = _STARTS.get((kind, index))
    if data is None:
        block = {"type": "text", "text": ""}
        if kind == "thinking":
            block = {"type": "thinking", "thinking": "", "signature": ""}
        data = event({"type": "content_block_start", "index": index, "content_block": block})
        _STARTS[(kind, index)] = data
    return data


def _stop(index: int) -> bytes:
    data = _STOPS.get(index)
    if data is None:
        data = _STOPS[index] = event({"type": "content_block_stop", "index": index})
    return data


def message_start(plan: Plan) -> bytes:
    usage = plan.usage.input_fields()
    usage["output_tokens"] = 1
    message: dict[str, Any] = {
        "id": plan.message_id,
        "type": "message",
        "role": "assistant",
        "model": plan.model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage,
    }
    return event({"type": "message_start", "message": message})


def message_delta(plan: Plan) -> bytes:
    return event(
        {
            "type": "message_delta",
            "delta": {"stop_reason": plan.stop_reason, "stop_sequence": plan.stop_sequence},
            "usage": plan.usage.final(),
        }
    )


def json_pieces(text: str) -> list[str]:
    """Tool input JSON split into 2-3 non-empty pieces (one if it is a single character)."""
    if len(text) < 2:
        return [text]
    if len(text) < 3:
        return [text[:1], text[1:]]
    a, b = len(text) // 3, 2 * len(text) // 3
    return [text[:a], text[a:b], text[b:]]


def _token_steps(kind: str, index: int, text: str) -> Iterator[Step]:
    for i in range(0, len(text), 4):
        yield TOKEN, delta(kind, index, text[i : i + 4]), 1


def _thinking_steps(index: int, part: ThinkingPart) -> Iterator[Step]:
    yield PLAIN, _start("thinking", index), 0
    yield from _token_steps("thinking_delta", index, part.text)
    signature = {"type": "signature_delta", "signature": part.signature}
    yield PLAIN, event({"type": "content_block_delta", "index": index, "delta": signature}), 0


def _tool_steps(index: int, part: ToolPart) -> Iterator[Step]:
    block = {"type": "tool_use", "id": part.id, "name": part.name, "input": {}}
    yield PLAIN, event({"type": "content_block_start", "index": index, "content_block": block}), 0
    pieces = json_pieces(part.json)
    for piece in pieces[:-1]:
        yield PIECE, delta("input_json_delta", index, piece), 0
    # The call's tokens count as sent once its JSON is complete.
    yield PIECE, delta("input_json_delta", index, pieces[-1]), part.tokens


def _cited_text_steps(index: int, part: TextPart) -> Iterator[Step]:
    """A cited text block as the API streams one: it starts with empty ``citations``, each
    citation comes as a ``citations_delta`` before the text it supports."""
    block = {"type": "text", "text": "", "citations": []}
    yield PLAIN, event({"type": "content_block_start", "index": index, "content_block": block}), 0
    for citation in part.citations or ():
        cited = {"type": "citations_delta", "citation": citation}
        yield PLAIN, event({"type": "content_block_delta", "index": index, "delta": cited}), 0
    yield from _token_steps("text_delta", index, part.text)


def _search_steps(index: int, part: SearchPart) -> Iterator[Step]:
    """The ``server_tool_use`` block (its query streamed as input JSON), then the whole
    ``web_search_tool_result`` in its start event, as the API sends them."""
    use = part.use_block({})
    yield PLAIN, event({"type": "content_block_start", "index": index, "content_block": use}), 0
    pieces = json_pieces(part.json)
    for piece in pieces[:-1]:
        yield PIECE, delta("input_json_delta", index, piece), 0
    yield PIECE, delta("input_json_delta", index, pieces[-1]), part.tokens
    yield PLAIN, _stop(index), 0
    result = part.result_block()
    start = {"type": "content_block_start", "index": index + 1, "content_block": result}
    yield PLAIN, event(start), 0


def stream_steps(plan: Plan) -> Iterator[Step]:
    """Every event of the streamed reply to ``plan``, in order."""
    yield PLAIN, message_start(plan), 0
    index = 0
    for part in plan.parts:
        if isinstance(part, TextPart) and part.citations is not None:
            yield from _cited_text_steps(index, part)
        elif isinstance(part, TextPart):
            yield PLAIN, _start("text", index), 0
            yield from _token_steps("text_delta", index, part.text)
        elif isinstance(part, ThinkingPart):
            yield from _thinking_steps(index, part)
        elif isinstance(part, SearchPart):
            yield from _search_steps(index, part)
            index += 1  # the search's two blocks: the result block ends below
        else:
            yield from _tool_steps(index, part)
        yield PLAIN, _stop(index), 0
        index += 1
    yield FINAL, message_delta(plan), 0
    yield PLAIN, MESSAGE_STOP, 0
