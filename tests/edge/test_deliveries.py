"""The edge confirms each request whose final event it wrote, or whose client left first
(docs/billing.md, "Billed only when delivered"); never one it failed. Real NATS and JetStream."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from ezat_common import envelopes
from ezat_common.envelopes import CancelRequest, Delivered, ReplyBody, ReplyEnd, ReplyHead
from ezat_edge.deliveries import Deliveries
from nats.aio.msg import Msg

from .test_owner_liveness import BODY, STREAM_END, STREAM_START, Holder, _through_http, holding


@pytest.fixture
async def holder(nats_url: str) -> AsyncIterator[Holder]:
    async with holding(nats_url, ping_interval=10.0, confirm=True) as h:
        yield h


def confirmed(h: Holder) -> list[str]:
    assert h.relay.deliveries is not None
    return list(h.relay.deliveries._pending)


async def test_flush_puts_one_confirmation_message_in_the_usage_outbox(holder: Holder) -> None:
    deliveries = Deliveries(holder.nc, holder.subjects)
    for uid in ("u1", "u2", "u3"):
        deliveries.add(uid)
    assert await deliveries.flush()
    assert await deliveries.flush()  # nothing pending: nothing sent
    js = holder.nc.jetstream()
    info = await js.stream_info(holder.subjects.outbox_stream)
    assert info.state.messages == 1
    stored = await js.get_msg(holder.subjects.outbox_stream, info.state.last_seq)
    assert envelopes.decode_outbox(stored.data or b"") == Delivered(uids=["u1", "u2", "u3"])


async def test_a_delivered_body_and_a_delivered_stream_are_confirmed(holder: Holder) -> None:
    async def answers(h: Holder, env: envelopes.ClientRequest, n: int) -> None:
        if n == 2:  # the second request is a stream
            await h.send(env, ReplyHead(data=STREAM_START))
            await h.send(env, ReplyEnd(data=STREAM_END))
        else:
            await h.send(env, ReplyBody(status=200, data=BODY))

    await holder.behave(answers)
    call = holder.call()
    resp = await holder.relay.run(call, b"{}")
    assert resp.status == 200
    assert confirmed(holder) == [call.envelope.uid]
    status, body, _ = await _through_http(holder)
    assert status == 200 and body.endswith(STREAM_END)
    assert len(confirmed(holder)) == 2
    assert holder.received[-1].uid == confirmed(holder)[-1]


async def test_a_stream_ended_by_a_dead_holder_is_not_confirmed_and_is_cancelled_as_failed(
    holder: Holder,
) -> None:
    cancels: list[CancelRequest] = []

    async def on_cancel(msg: Msg) -> None:
        cancels.append(envelopes.decode_cancel(msg.data))

    await holder.nc.subscribe(holder.subjects.cancel, cb=on_cancel)

    async def dies(h: Holder, env: envelopes.ClientRequest, n: int) -> None:
        await h.send(env, ReplyHead(data=STREAM_START))

    await holder.behave(dies)
    status, body, _ = await _through_http(holder)
    assert status == 200 and b"event: error" in body
    await holder.nc.flush()
    await asyncio.sleep(0.1)
    assert confirmed(holder) == []
    # The router still running it (behind a dead translator) records it failed, not charged.
    assert [(c.uid, c.reason) for c in cancels] == [(holder.received[0].uid, "gateway")]


async def test_a_client_that_leaves_is_confirmed(holder: Holder) -> None:
    async def slow(h: Holder, env: envelopes.ClientRequest, n: int) -> None:
        await h.beat(env, 2.0)

    await holder.behave(slow)
    call = holder.call()
    handler = asyncio.ensure_future(holder.relay.run(call, b"{}"))
    await asyncio.sleep(0.3)
    handler.cancel()
    with pytest.raises(asyncio.CancelledError):
        await handler
    # An early close is billed as the router records it (client_closed, estimated).
    assert confirmed(holder) == [call.envelope.uid]
