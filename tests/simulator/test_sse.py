"""Stream encoding: Anthropic's event order, decodable by the gateway's own schemas."""

from __future__ import annotations

import msgspec
import pytest
from ezat_common.schemas import anthropic as schema
from ezat_simulator import sse
from ezat_simulator.cache import CacheUsage
from ezat_simulator.engine import plan_reply, read_directives

TOOL = {
    "name": "w",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}


def _plan() -> object:
    req = {
        "model": "claude-x",
        "max_tokens": 100,
        "tools": [TOOL],
        "messages": [{"role": "user", "content": "go [sim:think=2 tokens=3 tool=w]"}],
    }
    directives, seed = read_directives(req)
    return plan_reply(req, directives, seed, seq=1, input_tokens=50, cache=CacheUsage(10, 20, 0))


def _events(plan: object) -> list[tuple[str, bytes, int, int]]:
    out = []
    for kind, data, tokens in sse.stream_steps(plan):  # type: ignore[arg-type]
        head, body = data.split(b"\ndata: ")
        assert data.endswith(b"\n\n") and head.startswith(b"event: ")
        out.append((head[7:].decode(), body.strip(), kind, tokens))
    return out


def test_event_sequence() -> None:
    names = [
        e[0]
        + (
            ""
            if e[0] != "content_block_delta"
            else ":" + msgspec.json.decode(e[1])["delta"]["type"]
        )
        for e in _events(_plan())
    ]
    assert names == [
        "message_start",
        "content_block_start",
        "content_block_delta:thinking_delta",
        "content_block_delta:thinking_delta",
        "content_block_delta:signature_delta",
        "content_block_stop",
        "content_block_start",
        *["content_block_delta:text_delta"] * 3,
        "content_block_stop",
        "content_block_start",
        *["content_block_delta:input_json_delta"] * 3,
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]


def test_events_decode_with_the_gateway_schema_and_add_up() -> None:
    plan = _plan()
    decoded = [schema.decode_event(body) for _, body, _, _ in _events(plan)]
    start = decoded[0]
    assert isinstance(start, schema.MessageStart)
    assert start.message.id == "msg_sim_1" and start.message.model == "claude-x"
    assert (
        start.message.usage.input_tokens == 20 and start.message.usage.cache_read_input_tokens == 10
    )
    assert start.message.usage.output_tokens == 1
    texts = [
        e.delta.text
        for e in decoded
        if isinstance(e, schema.ContentBlockDelta) and isinstance(e.delta, schema.TextDelta)
    ]
    assert all(len(t) == 4 for t in texts) and "".join(texts) == plan.parts[1].text  # type: ignore[attr-defined]
    pieces = [
        e.delta.partial_json
        for e in decoded
        if isinstance(e, schema.ContentBlockDelta) and isinstance(e.delta, schema.InputJsonDelta)
    ]
    assert msgspec.json.decode("".join(pieces)) == {"city": "Oslo"}
    final = decoded[-2]
    assert isinstance(final, schema.MessageDelta)
    assert final.delta.stop_reason == "tool_use"
    assert final.usage.output_tokens == 2 + 3 + 4  # thinking + text + ceil(15 chars / 4)
    assert final.usage.reasoning_tokens == 2
    assert final.usage.cache_creation == schema.CacheCreation(ephemeral_5m_input_tokens=20)


def test_step_kinds_and_token_weights() -> None:
    events = _events(_plan())
    assert [e[2] for e in events].count(sse.TOKEN) == 5
    assert [e[2] for e in events].count(sse.PIECE) == 3
    assert [e[2] for e in events].count(sse.FINAL) == 1
    assert sum(e[3] for e in events) == 9


@pytest.mark.parametrize(
    ("text", "pieces"), [("{}", ["{", "}"]), ("x", ["x"]), ('{"a":1}', ['{"', 'a"', ":1}"])]
)
def test_json_pieces(text: str, pieces: list[str]) -> None:
    assert sse.json_pieces(text) == pieces
