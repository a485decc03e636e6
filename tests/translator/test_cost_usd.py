"""The answer's ``cost_usd`` the router put in the Anthropic final usage (message_delta) or in
the ``x-ezat-cost-usd`` header (JSON) reaches both OpenAI APIs' usage; without it the usage is as
before (docs/billing.md, "Cost in the answer")."""

from __future__ import annotations

from typing import Any

import msgspec
from ezat_translator.conversions import cost_of
from ezat_translator.core.anthropic_to_openai import to_chat_completion
from ezat_translator.core.anthropic_to_responses import ResponseMeta, to_response
from ezat_translator.core.chat_stream import ChatStream
from ezat_translator.core.responses_stream import ResponsesStream
from support.anthropic_streams import event
from support.responses_sse import responses_events

META = ResponseMeta(request_id="req_1", response_model="m", created_at=1793318400)
START = event(
    {
        "type": "message_start",
        "message": {"id": "msg_1", "model": "m", "usage": {"input_tokens": 9, "output_tokens": 1}},
    }
)
TEXT = (
    event({"type": "content_block_start", "index": 0, "content_block": {"type": "text"}})
    + event(
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}}
    )
    + event({"type": "content_block_stop", "index": 0})
)


def end(usage: dict[str, Any]) -> bytes:
    delta = {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": usage}
    return event(delta) + event({"type": "message_stop"})


BODY = msgspec.json.encode(
    {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [{"type": "text", "text": "Hi"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 9, "output_tokens": 4},
    }
)


def chat_usage(out: bytes) -> dict[str, Any]:
    lines = [line for line in out.split(b"\n\n") if line.startswith(b"data: {")]
    last = msgspec.json.decode(lines[-1][6:])
    assert last["choices"] == []
    usage: dict[str, Any] = last["usage"]
    return usage


def test_chat_stream_usage_chunk_carries_the_cost() -> None:
    stream = ChatStream(request_id="r", response_model="m", created=1, include_usage=True)
    out = stream.feed(START + TEXT) + stream.feed(end({"output_tokens": 4, "cost_usd": 0.000087}))
    usage = chat_usage(out)
    assert usage["cost_usd"] == 0.000087 and usage["completion_tokens"] == 4


def test_chat_stream_without_a_cost_has_no_field() -> None:
    stream = ChatStream(request_id="r", response_model="m", created=1, include_usage=True)
    out = stream.feed(START + TEXT + end({"output_tokens": 4}))
    assert "cost_usd" not in chat_usage(out)


def test_responses_stream_completed_carries_the_cost() -> None:
    stream = ResponsesStream(META)
    stream.feed(START + TEXT + end({"output_tokens": 4, "cost_usd": 1.5}))
    (completed,) = responses_events(stream.final(), first=8)
    assert completed["response"]["usage"]["cost_usd"] == 1.5


def test_json_answers_take_the_cost_from_the_header() -> None:
    cost = cost_of({"x-ezat-cost-usd": "0.000087"})
    chat, _ = to_chat_completion(BODY, request_id="r", response_model="m", created=1, cost_usd=cost)
    assert msgspec.json.decode(chat)["usage"]["cost_usd"] == 0.000087
    response = msgspec.json.decode(to_response(BODY, META, None, cost))
    assert response["usage"]["cost_usd"] == 0.000087
    plain, _ = to_chat_completion(BODY, request_id="r", response_model="m", created=1)
    assert "cost_usd" not in msgspec.json.decode(plain)["usage"]
    assert "cost_usd" not in msgspec.json.decode(to_response(BODY, META))["usage"]
    assert cost_of({}) is None and cost_of({"x-ezat-cost-usd": "n/a"}) is None
