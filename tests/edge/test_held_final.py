"""The edge holds a final reply until its usage is durable (docs/billing.md, ezat_common.settling).

Real NATS and JetStream, the edge's real ``Relay``; a fake router answers on the translate subject
the way the real one does for an Anthropic request, and a fake billing answers (or not) on the
usage-record subject. The whole stack's path is covered by the e2e suite; these tests pin down
what the edge does when the outbox's acknowledgement is late, negative or missing.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import aiohttp
import nats
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from ezat_common import bus, envelopes
from ezat_common.envelopes import ClientRequest, ReplyBody, ReplyEnd, ReplyHead, UsageRecord
from ezat_common.outbox import Outbox
from ezat_common.settlement import DURABLE_DEADLINE
from ezat_common.settling import Held
from ezat_common.subjects import Subjects
from ezat_edge.relay import Call, Relay
from ezat_edge.streams import SseResponse
from nats.aio.client import Client
from nats.aio.msg import Msg
from prometheus_client import REGISTRY

BODY = b'{"id":"msg_1","type":"message","content":[{"type":"text","text":"hi"}]}'
STREAM_START = b'event: message_start\ndata: {"type":"message_start"}\n\n'
STREAM_END = b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
FALLBACKS = "ezat_edge_usage_fallbacks_total"


def fallbacks() -> float:
    """The edge's count of held finals whose record billing had to store (docs/billing.md)."""
    return REGISTRY.get_sample_value(FALLBACKS) or 0.0


# What the fake router does with the record before sending the held final reply.
Ack = Callable[["Edge", ClientRequest, bytes], Awaitable[None]]


@dataclass
class Edge:
    nc: Client
    subjects: Subjects
    relay: Relay
    outbox: Outbox
    billed: list[UsageRecord] = field(default_factory=list)
    billing_answers: bool = True

    def call(self, request: web.Request | None = None) -> Call:
        env = ClientRequest(
            request_id=f"req-{uuid.uuid4().hex[:8]}",
            uid=uuid.uuid4().hex,
            api="messages",
            key_id="key-1",
            reply_to="",
            received_at=time.time(),
        )
        return Call(request, env.request_id, "anthropic", env, {}, time.monotonic())  # type: ignore[arg-type]

    async def route_with(self, ack: Ack, *, stream: bool) -> None:
        """Answer every client request as the router does for a receiver that holds the end."""

        async def on_request(msg: Msg) -> None:
            env = envelopes.decode_client_request(msg.data)
            rec = UsageRecord(
                request_id=env.request_id,
                uid=env.uid,
                key_id=env.key_id,
                model="m",
                api="messages",
                stream=stream,
                status="complete",
                output_tokens=7,
            )
            usage = envelopes.encode(rec)
            if stream:
                await self.nc.publish(env.reply_to, envelopes.encode(ReplyHead(data=STREAM_START)))
            await ack(self, env, usage)
            final = (
                ReplyEnd(data=STREAM_END, usage=usage)
                if stream
                else ReplyBody(status=200, data=BODY, usage=usage)
            )
            await self.nc.publish(env.reply_to, envelopes.encode(final))

        await self.nc.subscribe(self.subjects.translate, cb=on_request)
        await self.nc.flush()


async def outbox_acks(edge: Edge, env: ClientRequest, usage: bytes) -> None:
    """The real thing: JetStream stores the record and acknowledges to the edge."""
    assert await edge.outbox.publish(env.uid, usage, bus.ack_subject_of(env.reply_to), timeout=2.0)


async def ack_overtakes(edge: Edge, env: ClientRequest, usage: bytes) -> None:
    """A stored record whose acknowledgement reaches the edge before the final reply."""
    await outbox_acks(edge, env, usage)
    await asyncio.sleep(0.2)


async def outbox_refuses(edge: Edge, env: ClientRequest, usage: bytes) -> None:
    """JetStream answers with an error (e.g. the stream is full: discard new)."""
    error = {"error": {"code": 503, "err_code": 10077, "description": "maximum messages exceeded"}}
    await edge.nc.publish(bus.ack_subject_of(env.reply_to), json.dumps(error).encode())


async def outbox_silent(edge: Edge, env: ClientRequest, usage: bytes) -> None:
    """No acknowledgement at all (JetStream down or the message lost)."""


@pytest.fixture
async def edge(nats_url: str) -> AsyncIterator[Edge]:
    nc = await nats.connect(nats_url)
    subjects = Subjects(prefix=f"h{uuid.uuid4().hex[:10]}")
    inbox = bus.Inbox(nc, subjects, "edge.test")
    await inbox.start()
    relay = Relay(nc, subjects, inbox, bus.Claims(nc, subjects, "edge"), 5.0, 10.0, 30.0)
    out = Outbox(nc, subjects)
    await out.ensure_stream()
    e = Edge(nc, subjects, relay, out)

    async def on_record(msg: Msg) -> None:
        if not e.billing_answers:
            return
        rec = envelopes.decode_usage_record(msg.data)
        e.billed.append(rec)
        await msg.respond(envelopes.encode(envelopes.UsageAck(request_id=rec.request_id, ok=True)))

    await nc.subscribe(subjects.usage_record, cb=on_record)
    try:
        yield e
    finally:
        await nc.jetstream().delete_stream(subjects.outbox_stream)
        await nc.close()


@pytest.mark.parametrize("ack", [outbox_acks, ack_overtakes], ids=["after", "before"])
async def test_a_body_acknowledged_by_the_outbox_is_released_without_billing(
    edge: Edge, ack: Ack
) -> None:
    await edge.route_with(ack, stream=False)
    before = fallbacks()
    resp = await edge.relay.run(edge.call(), b"{}")
    assert isinstance(resp, web.Response)
    assert (resp.status, resp.body) == (200, BODY)
    assert edge.billed == []  # the outbox holds it; billing's request/reply was not needed
    assert fallbacks() == before


@pytest.mark.parametrize("ack", [outbox_refuses, outbox_silent], ids=["refused", "silent"])
async def test_without_the_outbox_billing_stores_the_record_before_the_body_leaves(
    edge: Edge, ack: Ack
) -> None:
    await edge.route_with(ack, stream=False)
    call = edge.call()
    before = fallbacks()
    resp = await edge.relay.run(call, b"{}")
    assert isinstance(resp, web.Response)
    assert (resp.status, resp.body) == (200, BODY)
    assert [(r.uid, r.output_tokens) for r in edge.billed] == [(call.envelope.uid, 7)]
    assert fallbacks() == before + 1  # what ops watch for an outbox in trouble


async def test_a_record_nobody_can_store_withholds_the_body(edge: Edge) -> None:
    edge.billing_answers = False
    await edge.route_with(outbox_silent, stream=False)
    started = time.monotonic()
    resp = await edge.relay.run(edge.call(), b"{}")
    assert isinstance(resp, web.Response)
    assert resp.status == 500
    assert resp.body is not None and BODY not in resp.body
    error = json.loads(resp.body)["error"]
    assert error["type"] == "api_error" and "not charged" in error["message"]
    # Bounded: the outbox's second, then billing within the 2 s deadline.
    assert time.monotonic() - started < DURABLE_DEADLINE + 1.0


async def test_a_client_leaving_while_the_record_is_stored_does_not_lose_it(edge: Edge) -> None:
    await edge.route_with(outbox_silent, stream=False)
    call = edge.call()
    handler = asyncio.ensure_future(edge.relay.run(call, b"{}"))
    await asyncio.sleep(0.3)  # the body is held, waiting for an acknowledgement
    handler.cancel()
    with pytest.raises(asyncio.CancelledError):
        await handler
    # The confirmation goes on without the client: past the outbox's second, billing stores it.
    deadline = time.monotonic() + DURABLE_DEADLINE + 1.0
    while not edge.billed and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert [r.uid for r in edge.billed] == [call.envelope.uid]


async def _stream_through_http(edge: Edge) -> bytes:
    sent: list[web.StreamResponse] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        sent.append(await edge.relay.run(edge.call(request), b"{}"))
        return sent[-1]

    app = web.Application()
    app.router.add_post("/v1/messages", handler)
    async with (
        TestServer(app) as server,
        aiohttp.ClientSession() as http,
        http.post(server.make_url("/v1/messages"), data=b"{}") as resp,
    ):
        assert resp.status == 200
        body = await resp.read()
    # The response whose headers leave with its first bytes (tests/edge/test_sse_response.py).
    assert [type(r) for r in sent] == [SseResponse]
    return body


async def test_a_stream_ends_with_message_stop_once_its_record_is_durable(edge: Edge) -> None:
    await edge.route_with(outbox_acks, stream=True)
    body = await _stream_through_http(edge)
    assert body == STREAM_START + STREAM_END
    assert edge.billed == []


async def test_a_stream_whose_record_nobody_can_store_ends_with_an_error_event(
    edge: Edge,
) -> None:
    edge.billing_answers = False
    await edge.route_with(outbox_refuses, stream=True)
    body = await _stream_through_http(edge)
    assert body.startswith(STREAM_START)
    assert b"message_stop" not in body
    assert b"event: error" in body and b"not charged" in body


async def _queued_final(edge: Edge, usage: bytes) -> tuple[Held, asyncio.Queue[Msg]]:
    """A request whose held final reply arrived but was never taken off its queue."""
    token, subject, queue = edge.relay.inbox.open()
    final = ReplyEnd(data=STREAM_END, usage=usage)
    await queue.put(Msg(_client=edge.nc, subject=subject, data=envelopes.encode(final)))
    return Held(token), queue


def _record(uid: str) -> bytes:
    rec = UsageRecord(
        request_id="r", uid=uid, key_id="k", model="m", api="messages", stream=True,
        status="complete", output_tokens=5,
    )  # fmt: skip
    return envelopes.encode(rec)


async def test_a_final_reply_left_unread_by_a_departed_client_is_still_confirmed(
    edge: Edge,
) -> None:
    """The client left while earlier chunks were being written: the held end is rescued from the
    queue and billing stores its record once the outbox stays silent."""
    uid = uuid.uuid4().hex
    held, queue = await _queued_final(edge, _record(uid))
    edge.relay.holder.close(queue, held)
    assert held.settlement.handed_off
    await edge.relay.holder.settle(timeout=DURABLE_DEADLINE + 1)
    assert [r.uid for r in edge.billed] == [uid]
    # The token is closed once the confirmation is over.
    assert not edge.relay.holder.confirming


async def test_a_rescued_final_still_hears_a_late_puback(edge: Edge) -> None:
    """The inbox token stays open for the background confirmation: a PubAck arriving after the
    client left settles it without asking billing."""
    held, queue = await _queued_final(edge, _record(uuid.uuid4().hex))
    edge.relay.holder.close(queue, held)
    await asyncio.sleep(0.2)
    ack = {"stream": edge.subjects.outbox_stream, "seq": 1}
    await edge.nc.publish(edge.relay.inbox.ack_subject(held.token), json.dumps(ack).encode())
    await edge.relay.holder.settle(timeout=DURABLE_DEADLINE + 1)
    assert edge.billed == []
