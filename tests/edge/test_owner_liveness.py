"""The edge tells a live holder of its request from a dead one (docs/reliability.md).

Real NATS and the edge's real ``Relay``; a fake holder (what the translator or router does)
answers on the translate subject, beats, or falls silent. The owner timeout is shortened here so
that each case takes a second; the rule is the same at the default 3 s (tests/faults).
"""

from __future__ import annotations

import asyncio
import contextlib
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
from ezat_common.config import DEFAULT_STREAM_BUFFER
from ezat_common.envelopes import (
    ClientRequest,
    Heartbeat,
    ReplyBody,
    ReplyChunk,
    ReplyEnd,
    ReplyError,
    ReplyHead,
)
from ezat_common.outbox import Outbox
from ezat_common.subjects import Subjects
from ezat_edge.deliveries import Deliveries
from ezat_edge.relay import Call, Relay
from ezat_edge.responses import Format
from nats.aio.client import Client

OWNER_TIMEOUT = 0.6
PING_INTERVAL = 0.4
BODY = b'{"id":"msg_1","type":"message","content":[]}'
STREAM_START = b'event: message_start\ndata: {"type":"message_start"}\n\n'
STREAM_END = b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
ANTHROPIC_PING = b'event: ping\ndata: {"type": "ping"}\n\n'

# What the fake holder does with the n-th publish (1-based) of a request it received.
Behaviour = Callable[["Holder", ClientRequest, int], Awaitable[None]]


@dataclass
class Holder:
    nc: Client
    subjects: Subjects
    relay: Relay
    received: list[ClientRequest] = field(default_factory=list)
    tasks: set[asyncio.Future[None]] = field(default_factory=set)

    def call(self, fmt: Format = "anthropic", request: web.Request | None = None) -> Call:
        env = ClientRequest(
            request_id=f"req-{uuid.uuid4().hex[:8]}",
            uid=uuid.uuid4().hex,
            api="chat" if fmt == "openai" else "messages",
            key_id="key-1",
            reply_to="",
            received_at=time.time(),
        )
        return Call(request, env.request_id, fmt, env, {}, time.monotonic())  # type: ignore[arg-type]

    async def behave(self, behaviour: Behaviour) -> None:
        async def on_request(msg: nats.aio.msg.Msg) -> None:
            env = envelopes.decode_client_request(msg.data)
            self.received.append(env)
            # Its own task: a holder that waits must not hold up the next publish.
            task = asyncio.ensure_future(behaviour(self, env, len(self.received)))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

        await self.nc.subscribe(self.subjects.translate, cb=on_request)
        await self.nc.flush()

    async def send(self, env: ClientRequest, reply: envelopes.Reply) -> None:
        await self.nc.publish(env.reply_to, envelopes.encode(reply))

    async def beat(self, env: ClientRequest, seconds: float, stream: bool = False) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            await self.send(env, Heartbeat(stream=stream))
            await asyncio.sleep(OWNER_TIMEOUT / 4)


@contextlib.asynccontextmanager
async def holding(
    nats_url: str,
    ping_interval: float = PING_INTERVAL,
    confirm: bool = False,
    stream_buffer_bytes: int = DEFAULT_STREAM_BUFFER,
) -> AsyncIterator[Holder]:
    """An edge relay on real NATS under a subject prefix of its own; ``confirm``: with the usage
    outbox and delivery confirmations (tests/edge/test_deliveries.py); ``stream_buffer_bytes``:
    its per-stream cap (tests/edge/test_slow_reader.py)."""
    nc = await nats.connect(nats_url)
    subjects = Subjects(prefix=f"o{uuid.uuid4().hex[:10]}")
    if confirm:
        await Outbox(nc, subjects).ensure_stream()
    inbox = bus.Inbox(nc, subjects, "edge.test")
    await inbox.start()
    relay = Relay(
        nc,
        subjects,
        inbox,
        bus.Claims(nc, subjects, "edge"),
        first_reply_timeout=30.0,
        ping_interval=ping_interval,
        owner_timeout=OWNER_TIMEOUT,
        deliveries=Deliveries(nc, subjects) if confirm else None,
        stream_buffer_bytes=stream_buffer_bytes,
    )
    try:
        yield Holder(nc, subjects, relay)
    finally:
        if confirm:
            await nc.jetstream().delete_stream(subjects.outbox_stream)
        await nc.close()


@pytest.fixture
async def holder(nats_url: str) -> AsyncIterator[Holder]:
    async with holding(nats_url) as h:
        yield h


async def dies_first_time(h: Holder, env: ClientRequest, n: int) -> None:
    if n > 1:
        await h.send(env, ReplyBody(status=200, data=BODY))


async def never_answers(h: Holder, env: ClientRequest, n: int) -> None:
    """A holder killed the moment it took the request, every time."""


def error_of(resp: web.StreamResponse) -> dict[str, object]:
    assert isinstance(resp, web.Response) and resp.body is not None
    error = json.loads(resp.body)["error"]
    assert isinstance(error, dict)
    return error


async def test_a_request_whose_holder_dies_before_replying_is_published_once_more(
    holder: Holder,
) -> None:
    await holder.behave(dies_first_time)
    call = holder.call()
    started = time.monotonic()
    resp = await holder.relay.run(call, b"{}")
    assert isinstance(resp, web.Response)
    assert (resp.status, resp.body) == (200, BODY)
    # Published again as a request of its own: a new uid (a record the first publish left is
    # never charged, docs/billing.md), a fresh inbox; the first is cancelled as failed.
    first, again = holder.received
    assert first.uid != again.uid == call.envelope.uid
    assert first.reply_to != again.reply_to
    assert first.request_id == again.request_id == call.rid
    assert OWNER_TIMEOUT <= time.monotonic() - started < OWNER_TIMEOUT + 1.0


@pytest.mark.parametrize(("fmt", "status"), [("anthropic", 529), ("openai", 503)])
async def test_a_holder_that_dies_again_gets_the_client_a_retryable_error(
    holder: Holder, fmt: Format, status: int
) -> None:
    await holder.behave(never_answers)
    started = time.monotonic()
    resp = await holder.relay.run(holder.call(fmt), b"{}")
    elapsed = time.monotonic() - started
    assert resp.status == status
    assert resp.headers["retry-after"] == "1"
    error = error_of(resp)
    assert "stopped before it finished; retry" in str(error["message"])
    if fmt == "anthropic":
        assert error["type"] == "overloaded_error"
    assert len(holder.received) == 2  # once more, not forever
    assert 2 * OWNER_TIMEOUT <= elapsed < 2 * OWNER_TIMEOUT + 1.0


async def test_heartbeats_keep_a_slow_request_alive(holder: Holder) -> None:
    async def slow(h: Holder, env: ClientRequest, n: int) -> None:
        await h.beat(env, 4 * OWNER_TIMEOUT)
        await h.send(env, ReplyBody(status=200, data=BODY))

    await holder.behave(slow)
    resp = await holder.relay.run(holder.call(), b"{}")
    assert (resp.status, resp.body) == (200, BODY)  # type: ignore[attr-defined]
    assert len(holder.received) == 1  # never taken for dead


async def _through_http(holder: Holder, fmt: Format = "anthropic") -> tuple[int, bytes, float]:
    async def handler(request: web.Request) -> web.StreamResponse:
        return await holder.relay.run(holder.call(fmt, request), b"{}")

    app = web.Application()
    app.router.add_post("/v1/messages", handler)
    started = time.monotonic()
    async with (
        TestServer(app) as server,
        aiohttp.ClientSession() as http,
        http.post(server.make_url("/v1/messages"), data=b"{}") as resp,
    ):
        body = await resp.read()
        return resp.status, body, time.monotonic() - started


async def test_a_started_stream_whose_holder_dies_ends_with_an_error_event(
    holder: Holder,
) -> None:
    async def dies_mid_stream(h: Holder, env: ClientRequest, n: int) -> None:
        await h.send(env, ReplyHead(data=STREAM_START))

    await holder.behave(dies_mid_stream)
    status, body, elapsed = await _through_http(holder)
    assert status == 200
    assert body.startswith(STREAM_START)
    assert b"event: error" in body and b"overloaded_error" in body and b"message_stop" not in body
    assert elapsed < OWNER_TIMEOUT + 1.0
    assert len(holder.received) == 1  # a started stream is never run twice


async def test_a_started_openai_stream_whose_holder_dies_ends_with_error_then_done(
    holder: Holder,
) -> None:
    chunk = b'data: {"object":"chat.completion.chunk"}\n\n'

    async def dies_mid_stream(h: Holder, env: ClientRequest, n: int) -> None:
        await h.send(env, ReplyHead(data=chunk))

    await holder.behave(dies_mid_stream)
    status, body, _ = await _through_http(holder, "openai")
    assert status == 200
    events = [e for e in body.split(b"\n\n") if e]
    assert events[0] == chunk.strip()
    assert json.loads(events[-2].removeprefix(b"data: "))["error"]["message"].endswith("; retry")
    assert events[-1] == b"data: [DONE]"


async def test_a_live_stream_quiet_for_longer_than_the_owner_timeout_goes_on(
    holder: Holder,
) -> None:
    async def thinks(h: Holder, env: ClientRequest, n: int) -> None:
        await h.send(env, ReplyHead(data=STREAM_START))
        await h.beat(env, 3 * OWNER_TIMEOUT, stream=True)  # a long pause upstream
        await h.send(env, ReplyEnd(data=STREAM_END))

    await holder.behave(thinks)
    status, body, _ = await _through_http(holder)
    assert status == 200
    assert body.startswith(STREAM_START) and body.endswith(STREAM_END)
    assert b"error" not in body


async def test_a_stream_waiting_past_ping_interval_is_committed_and_kept_alive(
    holder: Holder,
) -> None:
    async def slow_first_byte(h: Holder, env: ClientRequest, n: int) -> None:
        await h.beat(env, 3 * PING_INTERVAL, stream=True)  # the router tries deployments
        await h.send(env, ReplyHead(headers={"x-ezat-deployment": "d"}, data=STREAM_START))
        await h.send(env, ReplyEnd(data=STREAM_END))

    await holder.behave(slow_first_byte)
    status, body, _ = await _through_http(holder)
    assert status == 200
    assert body.startswith(ANTHROPIC_PING)
    assert body.endswith(STREAM_START + STREAM_END)


async def test_a_committed_stream_whose_deployments_all_fail_ends_with_an_error_event(
    holder: Holder,
) -> None:
    async def fails_late(h: Holder, env: ClientRequest, n: int) -> None:
        await h.beat(env, 3 * PING_INTERVAL, stream=True)
        error = ReplyError(status=529, type="overloaded_error", message="all deployments busy")
        await h.send(env, error)

    await holder.behave(fails_late)
    status, body, _ = await _through_http(holder)
    assert status == 200
    assert body.startswith(ANTHROPIC_PING)
    assert b"event: error" in body and b"all deployments busy" in body


async def test_a_failure_that_comes_quickly_keeps_its_http_status(holder: Holder) -> None:
    async def refuses(h: Holder, env: ClientRequest, n: int) -> None:
        await h.beat(env, PING_INTERVAL / 2, stream=True)
        error = ReplyError(status=429, type="rate_limit_error", message="slow down")
        await h.send(env, error)

    await holder.behave(refuses)
    status, body, _ = await _through_http(holder)
    assert status == 429
    assert json.loads(body)["error"]["type"] == "rate_limit_error"


async def test_a_non_stream_heartbeat_never_commits_a_stream(holder: Holder) -> None:
    async def slow_body(h: Holder, env: ClientRequest, n: int) -> None:
        await h.beat(env, 3 * PING_INTERVAL, stream=False)
        await h.send(env, ReplyError(status=500, type="api_error", message="upstream broke"))

    await holder.behave(slow_body)
    status, body, _ = await _through_http(holder)
    assert status == 500  # a JSON request's error keeps its status however long it took
    assert json.loads(body)["error"]["message"] == "upstream broke"


async def test_a_request_published_while_no_translator_listens_waits_for_one(
    holder: Holder,
) -> None:
    """A rolling restart leaves the queue group empty for milliseconds: the request is published
    again until a translator is there, instead of failing at once."""

    async def answers(h: Holder, env: ClientRequest, n: int) -> None:
        await h.send(env, ReplyBody(status=200, data=BODY))

    call = asyncio.ensure_future(holder.relay.run(holder.call(), b"{}"))
    await asyncio.sleep(0.3)  # published, refused (no responders), published again ...
    assert not call.done()
    await holder.behave(answers)
    resp = await asyncio.wait_for(call, 2.0)
    assert (resp.status, resp.body) == (200, BODY)  # type: ignore[attr-defined]
    assert len(holder.received) == 1


async def test_with_no_translator_at_all_the_client_gets_a_retryable_error(
    holder: Holder,
) -> None:
    started = time.monotonic()
    resp = await holder.relay.run(holder.call(), b"{}")
    assert resp.status == 529
    assert "no translator available" in str(error_of(resp)["message"])
    assert 0.5 < time.monotonic() - started < 2.0


async def test_a_request_no_router_took_is_published_again(holder: Holder) -> None:
    """The translator found no router (a router's rolling restart): published again, answered."""

    async def no_router_first(h: Holder, env: ClientRequest, n: int) -> None:
        reply = envelopes.NO_ROUTER if n == 1 else ReplyBody(status=200, data=BODY)
        await h.send(env, reply)

    await holder.behave(no_router_first)
    resp = await holder.relay.run(holder.call(), b"{}")
    assert (resp.status, resp.body) == (200, BODY)  # type: ignore[attr-defined]
    assert len(holder.received) == 2


async def test_a_stream_with_a_numbered_message_skipped_ends_with_an_error_not_complete(
    holder: Holder,
) -> None:
    """A chunk lost on the way (its NATS server died between holder and edge; docs/reliability.md,
    "A 3-node NATS cluster"): the client gets an error event, never message_stop after a gap."""
    text = b'event: content_block_delta\ndata: {"type":"content_block_delta"}\n\n'

    async def loses_chunk_2(h: Holder, env: ClientRequest, n: int) -> None:
        await h.send(env, ReplyHead(data=STREAM_START))
        await h.send(env, ReplyChunk(data=text, seq=1))
        await h.send(env, ReplyChunk(data=text, seq=3))
        await h.send(env, ReplyEnd(data=STREAM_END, seq=4))

    await holder.behave(loses_chunk_2)
    status, body, _ = await _through_http(holder)
    assert status == 200
    assert body.startswith(STREAM_START + text)
    assert body.count(text) == 1
    assert b"event: error" in body and b"was lost" in body and b"message_stop" not in body


async def test_numbered_and_unnumbered_streams_in_order_complete(holder: Holder) -> None:
    text = b'event: content_block_delta\ndata: {"type":"content_block_delta"}\n\n'

    async def in_order(h: Holder, env: ClientRequest, n: int) -> None:
        numbered = n == 1
        await h.send(env, ReplyHead(data=STREAM_START))
        for i in (1, 2):
            await h.send(env, ReplyChunk(data=text, seq=i if numbered else 0))
        await h.send(env, ReplyEnd(data=STREAM_END, seq=3 if numbered else 0))

    await holder.behave(in_order)
    for _ in range(2):  # numbered (this gateway), then unnumbered (an older sender)
        status, body, _ = await _through_http(holder)
        assert (status, body) == (200, STREAM_START + text + text + STREAM_END)


async def test_a_committed_stream_whose_holder_dies_before_any_answer_is_published_again(
    holder: Holder,
) -> None:
    """Committed after ping_interval (200 and pings went out), then its holder died before any of
    the answer: nothing of it reached the client, so it is published once more, under a uid of
    its own, and the answer of the live replica follows the pings in the same stream."""

    async def dies_after_committing(h: Holder, env: ClientRequest, n: int) -> None:
        if n == 1:
            await h.beat(env, 2 * PING_INTERVAL, stream=True)  # committed; then silence
            return
        await h.send(env, ReplyHead(data=STREAM_START))
        await h.send(env, ReplyEnd(data=STREAM_END))

    await holder.behave(dies_after_committing)
    status, body, _ = await _through_http(holder)
    assert status == 200
    assert body.startswith(ANTHROPIC_PING)
    assert body.endswith(STREAM_START + STREAM_END)
    assert b"error" not in body
    assert len(holder.received) == 2
    assert holder.received[0].uid != holder.received[1].uid


async def test_a_committed_stream_whose_second_holder_dies_too_ends_with_the_error_event(
    holder: Holder,
) -> None:
    async def always_dies_after_committing(h: Holder, env: ClientRequest, n: int) -> None:
        await h.beat(env, 2 * PING_INTERVAL, stream=True)

    await holder.behave(always_dies_after_committing)
    status, body, _ = await _through_http(holder)
    assert status == 200
    assert body.startswith(ANTHROPIC_PING)
    assert b"event: error" in body and b"overloaded_error" in body
    assert len(holder.received) == 2


# ---- replies the edge cannot read (docs/architecture.md, "Messages that cannot be decoded") ----


def _undecodable_replies() -> float:
    from prometheus_client import REGISTRY

    value = REGISTRY.get_sample_value("ezat_undecodable_messages_total", {"message": "reply"})
    return value or 0.0


async def test_an_unreadable_first_reply_is_a_retryable_500_and_is_counted(
    holder: Holder,
) -> None:
    async def garbles(h: Holder, env: ClientRequest, n: int) -> None:
        await h.nc.publish(env.reply_to, b"\xc1 not msgpack")

    await holder.behave(garbles)
    before = _undecodable_replies()
    status, body, elapsed = await _through_http(holder)
    assert status == 500
    assert json.loads(body)["error"] == {"type": "api_error", "message": "internal error; retry"}
    assert elapsed < OWNER_TIMEOUT  # answered at once, not left to a timeout
    assert _undecodable_replies() == before + 1


async def test_an_unreadable_reply_inside_a_stream_ends_it_with_an_error_event(
    holder: Holder,
) -> None:
    async def garbles_mid_stream(h: Holder, env: ClientRequest, n: int) -> None:
        await h.send(env, ReplyHead(data=STREAM_START))
        await h.nc.publish(env.reply_to, b"\xc1 not msgpack")

    await holder.behave(garbles_mid_stream)
    status, body, elapsed = await _through_http(holder)
    assert status == 200
    assert body.startswith(STREAM_START)
    assert b"event: error" in body and b"internal error; retry" in body
    assert b"message_stop" not in body
    assert elapsed < OWNER_TIMEOUT
