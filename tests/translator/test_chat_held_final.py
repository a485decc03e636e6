"""The chat path keeps the router's ``usage`` on the final reply it converts: the edge holds the
converted end / body until that record is durable (docs/billing.md, ezat_common.settling)."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import nats
import pytest
from ezat_common import bus, envelopes
from ezat_common.envelopes import PART_LOST, ReplyBody, ReplyEnd, ReplyHead, UsageRecord
from ezat_common.exchange import Exchange
from ezat_common.liveness import Heartbeats
from ezat_common.subjects import Subjects
from ezat_translator.conversions import ChatConversion
from ezat_translator.core.chat_stream import ChatStream
from ezat_translator.openai_state import OpenAIState
from ezat_translator.relayed import Relayed
from nats.aio.client import Client
from nats.aio.msg import Msg

USAGE = envelopes.encode(
    UsageRecord(
        request_id="r1", uid="u1", key_id="k", model="m", api="chat", stream=True, status="complete"
    )
)
START = (
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":'
    b'"message","role":"assistant","model":"m","content":[],"stop_reason":null,'
    b'"usage":{"input_tokens":5,"output_tokens":1}}}\n\n'
)
END = (
    b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},'
    b'"usage":{"output_tokens":3}}\n\n'
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
)
BODY = msgspec.json.encode(
    {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [{"type": "text", "text": "hi"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 5, "output_tokens": 3},
    }
)


@pytest.fixture
async def nc(nats_url: str) -> AsyncIterator[Client]:
    conn = await nats.connect(nats_url)
    yield conn
    await conn.close()


def chat_path(nc: Client) -> Relayed:
    subjects = Subjects(prefix="heldchat")
    claims = bus.Claims(nc, subjects, "translator")
    return Relayed(nc, subjects, claims, "tr-1", "", Heartbeats(nc))


def state(stream: bool) -> OpenAIState:
    chunks = ChatStream(request_id="r1", response_model="gpt-x", created=1, include_usage=False)
    conv = ChatConversion("r1", "gpt-x", 1, chunks if stream else None, None, "k")  # type: ignore[arg-type]
    st = OpenAIState("r1", "u1", "k", "_INBOX.edge.1", conv, Exchange(time.monotonic()))
    st.ex.published(time.monotonic())  # as ``open`` leaves it: its route sent
    return st


async def test_a_converted_stream_end_keeps_the_record_it_waits_for(nc: Client) -> None:
    path = chat_path(nc)
    st = state(stream=True)
    path.states["7"] = st
    (head,) = path.step("7", st, ReplyHead(data=START))
    assert isinstance(head, ReplyHead)
    (end,) = path.step("7", st, ReplyEnd(data=END, usage=USAGE))
    assert isinstance(end, ReplyEnd)
    assert end.usage == USAGE
    assert end.data.endswith(b"data: [DONE]\n\n")


async def test_a_converted_body_keeps_the_record_it_waits_for(nc: Client) -> None:
    path = chat_path(nc)
    st = state(stream=False)
    path.states["8"] = st
    (body,) = path.step("8", st, ReplyBody(status=200, data=BODY, usage=USAGE))
    assert isinstance(body, ReplyBody)
    assert body.usage == USAGE
    assert msgspec.json.decode(body.data)["object"] == "chat.completion"


async def test_a_final_reply_without_a_record_stays_without_one(nc: Client) -> None:
    path = chat_path(nc)
    st = state(stream=False)
    path.states["9"] = st
    (body,) = path.step("9", st, ReplyBody(status=200, data=BODY))
    assert isinstance(body, ReplyBody) and body.usage == b""


async def test_a_converted_stream_is_numbered_anew_and_a_gap_from_the_router_is_an_error(
    nc: Client,
) -> None:
    """The translator checks the router's numbering (ReplyChunk.seq) and numbers what it sends
    the edge itself (a chunk may convert to nothing); a skipped number ends the stream with
    PART_LOST (docs/reliability.md, "A 3-node NATS cluster")."""
    path = chat_path(nc)
    st = state(stream=True)
    path.states["10"] = st
    (head,) = path.step("10", st, ReplyHead(data=START))
    assert isinstance(head, ReplyHead)
    (end,) = path.step("10", st, ReplyEnd(data=END, usage=USAGE, seq=1))
    assert isinstance(end, ReplyEnd) and end.seq == 1  # no chunk was sent before it
    st2 = state(stream=True)
    path.states["11"] = st2
    path.step("11", st2, ReplyHead(data=START))
    assert path.step("11", st2, ReplyEnd(data=END, usage=USAGE, seq=2)) == [PART_LOST]
    assert "11" not in path.states


@pytest.mark.parametrize(("others", "unsent"), [(0, False), (1, True)])
async def test_a_lone_converted_head_is_written_before_the_end_behind_it_is_converted(
    nc: Client, nats_url: str, others: int, unsent: bool
) -> None:
    """The router's head and end often come in one read (a short answer): with no other
    request in flight, the head's bytes leave for the edge first, so the client's first token
    does not wait for the end's conversion; with others, both share one write, which costs
    less per stream under load (relayed.py, ``on_reply``)."""
    path = chat_path(nc)
    for n in range(others):
        path.states[f"other-{n}"] = state(stream=True)
    await path.start()
    st = state(stream=True)
    unsent_at_end: list[int] = []

    class Watched(ChatConversion):
        def end(self, data: bytes) -> tuple[bytes, Any]:
            unsent_at_end.append(nc.pending_data_size)  # bytes published, not yet written
            return super().end(data)

    c = st.conv
    assert isinstance(c, ChatConversion)
    st.conv = Watched(c.request_id, c.response_model, c.created, c.stream, c.thinking, c.key_id)
    path.states["7"] = st
    edge: list[type] = []
    listener = await nats.connect(nats_url)
    try:
        got = await listener.subscribe(st.edge_reply_to, cb=functools.partial(_note, edge))
        await listener.flush()
        # Both replies handled back to back, as the subscription does with the two messages
        # of one read.
        subject = f"{path.prefix}.7"
        await path.on_reply(_msg(subject, ReplyHead(data=START + TEXT)))
        await path.on_reply(_msg(subject, ReplyEnd(data=END, seq=1)))
        async with asyncio.timeout(5):
            while len(edge) < 2:
                await asyncio.sleep(0.01)
        await got.unsubscribe()
    finally:
        await listener.close()
    assert edge == [ReplyHead, ReplyEnd]
    assert len(unsent_at_end) == 1 and (unsent_at_end[0] > 0) is unsent


TEXT = (
    b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
    b'"content_block":{"type":"text","text":""}}\n\n'
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
    b'"delta":{"type":"text_delta","text":"hi"}}\n\n'
    b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
)


async def _note(into: list[type], msg: Any) -> None:
    into.append(type(envelopes.decode_reply(msg.data)))


def _msg(subject: str, reply: envelopes.Reply) -> Msg:
    return Msg(_client=None, subject=subject, data=envelopes.encode(reply))  # type: ignore[arg-type]
