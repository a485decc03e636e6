"""Wire schemas: envelopes round-trip; stream events decode by tag; unknown tags are refused."""

from __future__ import annotations

import msgspec
import pytest
from ezat_common import envelopes
from ezat_common.schemas import anthropic as a


def test_client_request_round_trip_keeps_bytes() -> None:
    req = envelopes.ClientRequest(
        request_id="r1",
        api="messages",
        key_id="key_1",
        reply_to="_INBOX.x.1",
        received_at=1.5,
        body=b'{"a":\x00"\xff"}',
        session="s",
    )
    assert envelopes.decode_client_request(envelopes.encode(req)) == req


@pytest.mark.parametrize(
    "reply",
    [
        envelopes.ReplyHead(headers={"x-ezat-region": "local"}),
        envelopes.ReplyChunk(data=b"event: ping\ndata: {}\n\n"),
        envelopes.ReplyEnd(data=b"event: message_stop\n"),
        envelopes.ReplyBody(status=200, data=b"{}"),
        envelopes.ReplyError(status=529, type="overloaded_error", message="busy", retry_after=2),
    ],
)
def test_reply_union_dispatches_on_tag(reply: envelopes.Reply) -> None:
    decoded = envelopes.decode_reply(envelopes.encode(reply))
    assert type(decoded) is type(reply)
    assert decoded == reply


def test_stream_events_decode_by_type() -> None:
    start = a.decode_event(
        b'{"type":"message_start","message":{"id":"m","model":"x","usage":'
        b'{"input_tokens":5,"cache_read_input_tokens":2,"cache_creation":'
        b'{"ephemeral_5m_input_tokens":1,"ephemeral_1h_input_tokens":3}}}}'
    )
    assert isinstance(start, a.MessageStart)
    assert start.message.usage.input_tokens == 5
    assert start.message.usage.cache_creation is not None
    assert start.message.usage.cache_creation.ephemeral_1h_input_tokens == 3
    delta = a.decode_event(
        b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}'
    )
    assert isinstance(delta, a.ContentBlockDelta) and isinstance(delta.delta, a.TextDelta)
    tool = a.decode_event(
        b'{"type":"content_block_start","index":1,"content_block":'
        b'{"type":"tool_use","id":"t1","name":"f","input":{}}}'
    )
    assert isinstance(tool, a.ContentBlockStart)
    assert isinstance(tool.content_block, a.ToolUseBlock)
    assert isinstance(a.decode_event(b'{"type":"message_stop"}'), a.MessageStop)


def test_unknown_event_type_is_a_decode_error_the_relay_can_catch() -> None:
    with pytest.raises(msgspec.ValidationError):
        a.decode_event(b'{"type":"brand_new_event","x":1}')
