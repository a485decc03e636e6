"""The router end to end: real NATS, a fake deployment (aiohttp.web) and a fake billing.

A test publishes a RouteRequest as the translator would and reads the replies as the edge would.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec
import nats
import pytest
from ezat_common import bus, envelopes, outbox
from ezat_common.config import Config, DeploymentConfig, ModelConfig, Price, RouterConfig
from ezat_common.envelopes import (
    CancelRequest,
    Reply,
    ReplyBody,
    ReplyChunk,
    ReplyEnd,
    ReplyError,
    ReplyHead,
    RouteRequest,
    UsageAck,
    UsageRecord,
)
from ezat_common.redis_keys import RedisKeys
from ezat_common.subjects import Subjects
from ezat_router.app import RouterService
from ezat_router.shared_state import SharedState
from ezat_router.upstream import Upstream, pool
from nats.aio.client import Client
from nats.aio.msg import Msg

from .fake_upstream import (
    BLOCK_START,
    MESSAGE_DELTA,
    MESSAGE_STOP,
    STREAM_WRITES,
    FakeUpstream,
    error_body,
    error_event,
    message_start,
    text_delta,
)

MODEL = "anthropic/claude-x"
CLIENT_MODEL = "Claude-X"  # the name the client sent; every response must carry it
BODY = b'{"max_tokens":10,"messages":[{"role":"user","content":"hi"}],"stream":true}'
FINAL = (ReplyEnd, ReplyBody, ReplyError)


@dataclass
class Stack:
    nc: Client
    subjects: Subjects
    service: RouterService
    upstream: FakeUpstream
    records: list[UsageRecord] = field(default_factory=list)
    timeline: list[str] = field(default_factory=list)

    def request(self, **overrides: object) -> RouteRequest:
        fields: dict[str, object] = {
            "request_id": f"req-{uuid.uuid4().hex[:12]}",
            "uid": uuid.uuid4().hex,  # as the edge makes it: unique per request
            "api": "messages",
            "key_id": "key-1",
            "model": MODEL,
            "response_model": CLIENT_MODEL,
            "stream": True,
            "reply_to": f"_INBOX.test.{uuid.uuid4().hex}",
            "received_at": time.time(),
            "body": BODY,
            "beta": "some-beta-2025",
        }
        fields.update(overrides)
        return RouteRequest(**fields)

    async def send(
        self, req: RouteRequest, on_reply: Callable[[Reply], Awaitable[None]] | None = None
    ) -> list[Reply]:
        """Route ``req`` and collect its replies up to the final one."""
        replies: list[Reply] = []
        done = asyncio.Event()

        async def collect(msg: Msg) -> None:
            reply = envelopes.decode_reply(msg.data)
            replies.append(reply)
            self.timeline.append(type(reply).__name__)
            if on_reply is not None:
                await on_reply(reply)
            if isinstance(reply, FINAL):
                done.set()

        sub = await self.nc.subscribe(req.reply_to, cb=collect)
        try:
            await self.nc.publish(self.subjects.route, envelopes.encode(req))
            await asyncio.wait_for(done.wait(), 10)
        finally:
            await sub.unsubscribe()
        return replies

    async def record_of(self, request_id: str, timeout: float = 3.0) -> UsageRecord:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for rec in self.records:
                if rec.request_id == request_id:
                    return rec
            await asyncio.sleep(0.02)
        raise AssertionError(f"no usage record for {request_id}")


def deployment(name: str, region: str, base_url: str) -> DeploymentConfig:
    return DeploymentConfig(
        name=name,
        model=MODEL,
        base_url=base_url,
        upstream_model="upstream-x",
        api_key="secret-key",
        region=region,
    )


@contextlib.asynccontextmanager
async def running_stack(
    nats_url: str,
    layout: list[tuple[str, str]],
    billing: str = "ack",
    ack_delay: float = 0.0,
    breaker_failures: int = 5,
    **timeouts: float,
) -> AsyncIterator[Stack]:
    """Deployments ``(name, region)``; the router's own region is "eu", so "eu" ones go first.

    A deployment named ``dead`` points at a port where nothing listens. ``billing`` is "ack"
    (acknowledge every record after ``ack_delay``) or "silent" (never answer). Records the router
    stores in the JetStream outbox are seen too ("stored" in the timeline).
    """
    upstream = FakeUpstream()
    await upstream.start()
    with socket_closed_port() as dead_port:
        deps = [
            deployment(
                name,
                region,
                f"http://127.0.0.1:{dead_port}" if name == "dead" else f"{upstream.url}/{name}",
            )
            for name, region in layout
        ]
    cfg = Config(
        models=[
            ModelConfig(
                id=MODEL, context_window=1000, max_output_tokens=100, price=Price(input=1, output=1)
            )
        ],
        deployments=deps,
        router=RouterConfig(
            region="eu",
            breaker_failures=breaker_failures,
            **{
                "connect_timeout": 1.0,
                "first_byte_timeout": 3.0,
                "between_events_timeout": 3.0,
                **timeouts,
            },
        ),
    )
    nc = await nats.connect(nats_url)
    subjects = Subjects(prefix=f"t{uuid.uuid4().hex[:10]}")
    names = [d.name for d in deps]
    shared = SharedState(cfg.router, "eu", names, None, RedisKeys(subjects.prefix), time.time)
    service = RouterService(cfg, nc, subjects, Upstream(cfg.router, pool(cfg.router)), shared, "eu")
    stack = Stack(nc, subjects, service, upstream)

    async def on_usage(msg: Msg) -> None:
        rec = envelopes.decode_usage_record(msg.data)
        stack.records.append(rec)
        if billing == "silent":
            return
        await asyncio.sleep(ack_delay)
        stack.timeline.append("ack")
        await msg.respond(envelopes.encode(UsageAck(request_id=rec.request_id, ok=True)))

    async def on_outbox(msg: Msg) -> None:
        # A copy of what the router stored in the JetStream outbox (its fast path): the PubAck
        # the router waits for comes after the server stored it, so "stored" precedes the end.
        stack.records.append(envelopes.decode_usage_record(msg.data))
        stack.timeline.append("stored")

    await nc.subscribe(subjects.usage_record, cb=on_usage)
    await nc.subscribe(subjects.usage_outbox, cb=on_outbox)
    await stack.service.start()
    try:
        yield stack
    finally:
        await stack.service.stop()
        await nc.close()
        await upstream.stop()


@contextlib.contextmanager
def socket_closed_port() -> Iterator[int]:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    yield port


def chunks_of(replies: list[Reply]) -> bytes:
    """The streamed bytes: the head's first read, then every chunk."""
    return b"".join(r.data for r in replies if isinstance(r, ReplyHead | ReplyChunk))


def start_model(data: bytes) -> str:
    first = data.split(b"\n\n", 1)[0]
    assert first.startswith(b"event: message_start\ndata: ")
    return str(msgspec.json.decode(first.split(b"data: ", 1)[1])["message"]["model"])


# ---- streaming ---------------------------------------------------------------------------------


async def test_stream_relays_frames_in_order_and_ends_only_after_the_ack(nats_url: str) -> None:
    async with running_stack(nats_url, [("a", "eu"), ("b", "us")], ack_delay=0.3) as stack:
        stack.upstream.scripts["a"] = stack.upstream.sse(STREAM_WRITES)
        req = stack.request()
        replies = await stack.send(req)

        assert isinstance(replies[0], ReplyHead)
        assert replies[0].headers == {
            "x-ezat-region": "eu",
            "x-ezat-deployment": "a",
            "x-ezat-affinity": "none",
        }
        # One message per upstream read (the first rides in the head); message_stop held back.
        assert [type(r) for r in replies] == [ReplyHead, *[ReplyChunk] * 3, ReplyEnd]
        assert replies[0].data  # type: ignore[union-attr]
        data = chunks_of(replies)
        assert start_model(data) == CLIENT_MODEL
        upstream_bytes = b"".join(STREAM_WRITES)
        end = -len(MESSAGE_DELTA + MESSAGE_STOP)
        rest = upstream_bytes[upstream_bytes.index(b"event: ping") : end]
        assert data.endswith(rest)
        # message_delta rides in the end, its usage with the answer's cost: 25 input + 5 output
        # tokens at $1 per million each (docs/billing.md, "Cost in the answer").
        final = replies[-1]
        assert isinstance(final, ReplyEnd) and final.data.endswith(MESSAGE_STOP)
        delta = msgspec.json.decode(final.data[: -len(MESSAGE_STOP)].split(b"data: ", 1)[1])
        assert delta["usage"] == {"output_tokens": 5, "cost_usd": 0.00003}
        assert delta["delta"] == {"stop_reason": "end_turn"}
        # Numbered after the head, the end one after the last chunk: a receiver sees a gap.
        assert final.seq == 4
        assert [r.seq for r in replies[1:]] == [1, 2, 3, 4]  # type: ignore[union-attr]
        # Chunks went out before the record was stored; the end only after it was durable.
        assert stack.timeline[-3:] == ["ReplyChunk", "stored", "ReplyEnd"]

        rec = await stack.record_of(req.request_id)
        assert (rec.status, rec.input_tokens, rec.output_tokens, rec.estimated) == (
            "complete",
            25,
            5,
            False,
        )
        assert (rec.deployment, rec.region, rec.model, rec.key_id) == ("a", "eu", MODEL, "key-1")
        assert (rec.api, rec.stream) == ("messages", True)
        # The prices of the answer's cost go with the record: billing's row costs the same.
        assert rec.prices is not None and (rec.prices.input, rec.prices.output) == (10**6, 10**6)
        assert req.received_at <= rec.upstream_started_at <= rec.first_token_at <= rec.finished_at

        [call] = stack.upstream.calls
        assert call.path == "/a/v1/messages"
        assert call.body.startswith(b'{"model":"upstream-x",')
        assert msgspec.json.decode(call.body)["messages"][0]["content"] == "hi"
        assert call.headers["x-api-key"] == "secret-key"
        assert call.headers["anthropic-version"] == "2023-06-01"
        assert call.headers["anthropic-beta"] == "some-beta-2025"
        assert call.headers["x-request-id"] == req.request_id


async def test_failover_on_529_before_the_first_byte(nats_url: str) -> None:
    async with running_stack(nats_url, [("a", "eu"), ("b", "us")], breaker_failures=2) as stack:
        up = stack.upstream
        up.scripts["a"] = up.status(529, error_body("overloaded_error", "Overloaded"))
        up.scripts["b"] = up.sse(STREAM_WRITES)
        replies = await stack.send(stack.request())

        assert isinstance(replies[0], ReplyHead)
        assert replies[0].headers["x-ezat-deployment"] == "b"
        assert isinstance(replies[-1], ReplyEnd)
        assert (len(up.calls_to("a")), len(up.calls_to("b"))) == (1, 1)
        assert stack.service.shared.health("a").failures == 1
        # A second consecutive fault opens the breaker (breaker_failures = 2 here): from then on
        # requests go straight to "b".
        await stack.send(stack.request())
        assert stack.service.shared.availability("a", time.time()) == "open"
        await stack.send(stack.request())
        assert (len(up.calls_to("a")), len(up.calls_to("b"))) == (2, 3)


async def test_failover_on_connect_error_and_on_an_error_event_before_anything_was_sent(
    nats_url: str,
) -> None:
    async with running_stack(nats_url, [("dead", "eu"), ("a", "us"), ("b", "us2")]) as stack:
        up = stack.upstream
        # "a" and "b" are both remote; whichever comes first answers with an immediate error.
        up.scripts["a"] = up.sse([error_event("overloaded_error", "busy")])
        up.scripts["b"] = up.sse([error_event("overloaded_error", "busy")])
        failed = await stack.send(stack.request())
        assert [msgspec.structs.replace(r, headers={}) for r in failed] == [
            ReplyError(
                status=529,
                type="overloaded_error",
                message="busy",
                retry_after=2.0,
                relayed=True,  # the deployment's words: the request log keeps the gateway's
            )
        ]
        assert len(up.calls) == 2  # dead (no HTTP call), then a and b: three attempts

        for name in ("a", "b", "dead"):
            stack.service.shared.succeeded(name, time.time())
        up.scripts["a"] = up.sse(STREAM_WRITES)
        up.scripts["b"] = up.sse(STREAM_WRITES)
        replies = await stack.send(stack.request(stream=True))
        assert isinstance(replies[0], ReplyHead)
        assert replies[0].headers["x-ezat-deployment"] in {"a", "b"}
        assert isinstance(replies[-1], ReplyEnd)


async def test_400_is_relayed_without_failover(nats_url: str) -> None:
    async with running_stack(nats_url, [("a", "eu"), ("b", "us")]) as stack:
        up = stack.upstream
        up.scripts["a"] = up.status(400, error_body("invalid_request_error", "tools.0: bad"))
        up.scripts["b"] = up.sse(STREAM_WRITES)
        replies = await stack.send(stack.request())
        assert [msgspec.structs.replace(r, headers={}) for r in replies] == [
            ReplyError(
                status=400,
                type="invalid_request_error",
                message="tools.0: bad",
                upstream_status=400,  # the deployment's own 400, for the request log
                relayed=True,  # its message is the deployment's: never in the request log
            )
        ]
        assert up.calls_to("b") == []
        assert stack.service.shared.health("a").failures == 0


async def test_every_deployment_rate_limited_gives_429_with_retry_after(nats_url: str) -> None:
    async with running_stack(nats_url, [("a", "eu"), ("b", "us")]) as stack:
        up = stack.upstream
        limited = up.status(429, error_body("rate_limit_error", "slow down"), {"retry-after": "3"})
        up.scripts["a"] = up.scripts["b"] = limited
        [reply] = await stack.send(stack.request())
        assert isinstance(reply, ReplyError)
        assert (reply.status, reply.type, reply.retry_after) == (429, "rate_limit_error", 3.0)
        assert "claude-x" in reply.message.lower() and "127.0.0.1" not in reply.message
        assert len(up.calls) == 2


async def test_configured_cooldown_is_the_clients_retry_after_and_the_rest(nats_url: str) -> None:
    async with running_stack(nats_url, [("a", "eu")], cooldown_default_seconds=7.0) as stack:
        up = stack.upstream
        up.scripts["a"] = up.status(429, error_body("rate_limit_error", "slow down"))
        before = time.time()
        [reply] = await stack.send(stack.request())
        assert isinstance(reply, ReplyError)
        assert (reply.status, reply.retry_after) == (429, 7.0)
        assert reply.message.endswith("retry after 7 seconds")
        rest_until = stack.service.shared.health("a").cooldown_until
        assert before + 7.0 <= rest_until <= time.time() + 7.0


async def test_mid_stream_error_event_ends_with_that_error(nats_url: str) -> None:
    async with running_stack(nats_url, [("a", "eu"), ("b", "us")]) as stack:
        up = stack.upstream
        up.scripts["a"] = up.sse(
            [message_start() + BLOCK_START, text_delta("Hi"), error_event("overloaded_error", "x")]
        )
        req = stack.request()
        replies = await stack.send(req)
        assert isinstance(replies[0], ReplyHead)
        assert start_model(chunks_of(replies)) == CLIENT_MODEL
        assert replies[-1] == ReplyError(
            status=529,
            type="overloaded_error",
            message="x",
            retry_after=2.0,
            headers={"x-ezat-region": "eu", "x-ezat-deployment": "a", "x-ezat-affinity": "none"},
            relayed=True,
        )
        assert up.calls_to("b") == []  # no failover once bytes reached the client
        rec = await stack.record_of(req.request_id)
        assert (rec.status, rec.error_type, rec.input_tokens) == ("failed", "overloaded_error", 25)


async def test_upstream_dropping_mid_stream_is_an_uncharged_error(nats_url: str) -> None:
    async with running_stack(nats_url, [("a", "eu"), ("b", "us")]) as stack:
        up = stack.upstream
        up.scripts["a"] = up.sse([message_start() + BLOCK_START, text_delta("Hi")])  # then EOF
        req = stack.request()
        replies = await stack.send(req)
        assert isinstance(replies[-1], ReplyError)
        assert (replies[-1].status, replies[-1].type) == (500, "api_error")
        assert "not charged" in replies[-1].message
        assert (await stack.record_of(req.request_id)).status == "failed"
        assert stack.service.shared.health("a").failures == 1  # a broken stream is a fault


@pytest.mark.parametrize(("reason", "status"), [("client", "client_closed"), ("gateway", "failed")])
async def test_cancel_closes_the_upstream_and_records_client_closed(
    nats_url: str, reason: Literal["client", "gateway"], status: str
) -> None:
    """A client's cancel is billed by estimate; the edge's "gateway" cancel (the stream's relay
    died, docs/billing.md) is recorded failed, not charged, with the same counts."""
    async with running_stack(nats_url, [("a", "eu")]) as stack:
        up = stack.upstream
        text = "Hello, streaming world"  # 22 characters: 6 estimated tokens
        up.scripts["a"] = up.hanging_sse(
            "a", [message_start(input_tokens=40) + BLOCK_START, text_delta(text)]
        )
        req = stack.request()
        cancelled_at = 0.0

        async def on_reply(reply: Reply) -> None:
            nonlocal cancelled_at
            streamed = isinstance(reply, ReplyHead | ReplyChunk)
            if streamed and text.encode() in reply.data and not cancelled_at:  # type: ignore[union-attr]
                cancelled_at = time.monotonic()
                cancel = CancelRequest(request_id=req.request_id, uid=req.uid, reason=reason)
                await stack.nc.publish(stack.subjects.cancel, envelopes.encode(cancel))

        with pytest.raises(TimeoutError):  # no final reply: the client is gone
            await asyncio.wait_for(stack.send(req, on_reply), 3)
        assert cancelled_at and "a" in up.disconnected_at
        assert up.disconnected_at["a"] - cancelled_at < 1.0
        rec = await stack.record_of(req.request_id)
        assert (rec.status, rec.input_tokens, rec.output_tokens, rec.estimated) == (
            status,
            40,
            6,
            True,
        )
        assert (rec.deployment, rec.uid) == ("a", req.uid)
        assert req.uid not in stack.service.handlers.tasks


# ---- non-streaming -----------------------------------------------------------------------------

RESPONSE = {
    "id": "msg_2",
    "type": "message",
    "role": "assistant",
    "model": "upstream-x",
    "content": [{"type": "text", "text": "Hello"}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 12, "output_tokens": 3, "cache_read_input_tokens": 100},
}


async def test_non_stream_body_with_model_rewritten_after_the_ack(nats_url: str) -> None:
    async with running_stack(nats_url, [("a", "eu")], ack_delay=0.1) as stack:
        stack.upstream.scripts["a"] = stack.upstream.json(RESPONSE)
        req = stack.request(stream=False)
        [reply] = await stack.send(req)
        assert isinstance(reply, ReplyBody)
        assert (reply.status, reply.headers["x-ezat-deployment"]) == (200, "a")
        # 12 input + 3 output at $1 per million, 100 cache reads at $0.10: 25 micro-dollars, in
        # the usage and the header (docs/billing.md, "Cost in the answer").
        usage = {**RESPONSE["usage"], "cost_usd": 0.000025}  # type: ignore[dict-item]
        expected = {**RESPONSE, "model": CLIENT_MODEL, "usage": usage}
        assert msgspec.json.decode(reply.data) == expected
        assert reply.headers["x-ezat-cost-usd"] == "0.000025"
        assert stack.timeline == ["stored", "ReplyBody"]
        rec = await stack.record_of(req.request_id)
        assert (rec.status, rec.stream, rec.input_tokens, rec.cache_read_tokens) == (
            "complete",
            False,
            12,
            100,
        )
        assert (rec.output_tokens, rec.estimated) == (3, False)


async def test_count_tokens_is_relayed_and_not_billed(nats_url: str) -> None:
    async with running_stack(nats_url, [("a", "eu")]) as stack:
        stack.upstream.scripts["a"] = stack.upstream.json({"input_tokens": 23})
        [reply] = await stack.send(stack.request(api="count_tokens", stream=False))
        assert isinstance(reply, ReplyBody)
        assert msgspec.json.decode(reply.data) == {"input_tokens": 23}
        [call] = stack.upstream.calls
        assert call.path == "/a/v1/messages/count_tokens"
        assert "anthropic-beta" not in call.headers
        await asyncio.sleep(0.1)
        assert stack.records == []


async def test_unknown_model_is_404(nats_url: str) -> None:
    async with running_stack(nats_url, [("a", "eu")]) as stack:
        [reply] = await stack.send(stack.request(model="anthropic/nope", response_model="nope"))
        assert isinstance(reply, ReplyError)
        assert (reply.status, reply.type, reply.code) == (404, "not_found_error", "model_not_found")
        assert reply.message == (
            "The model `nope` does not exist or you do not have access to it. "
            "GET /v1/models lists the models you can use."
        )


async def test_unacknowledged_usage_fails_the_request(nats_url: str) -> None:
    async with running_stack(nats_url, [("a", "eu")], billing="silent") as stack:
        # Billing silent AND the outbox unusable (its stream name taken by a stream that does
        # not hold the outbox subject): nothing can make the record durable.
        prefix = stack.subjects.prefix
        await stack.nc.jetstream().add_stream(
            name=stack.subjects.outbox_stream, subjects=[f"{prefix}.elsewhere"]
        )
        up = stack.upstream
        up.scripts["a"] = up.by_stream(up.sse(STREAM_WRITES), up.json(RESPONSE))
        streamed, plain = await asyncio.gather(
            stack.send(stack.request()),
            stack.send(stack.request(stream=False, body=BODY.replace(b"true", b"false"))),
        )
        for replies in (streamed, plain):
            assert isinstance(replies[-1], ReplyError)
            assert (replies[-1].status, replies[-1].type) == (500, "api_error")
            assert "could not be recorded" in replies[-1].message
        assert not any(isinstance(r, ReplyEnd) for r in streamed)
        assert isinstance(streamed[0], ReplyHead)


async def test_silent_billing_releases_the_end_after_the_outbox_stored_the_record(
    nats_url: str,
) -> None:
    async with running_stack(nats_url, [("a", "eu")], billing="silent") as stack:
        up = stack.upstream
        up.scripts["a"] = up.sse(STREAM_WRITES)
        replies = await stack.send(stack.request())
        assert isinstance(replies[-1], ReplyEnd)
        js = stack.nc.jetstream()
        info = await js.stream_info(stack.subjects.outbox_stream)
        assert info.state.messages == 1
        stored = await js.get_last_msg(stack.subjects.outbox_stream, stack.subjects.usage_outbox)
        assert stored.data is not None
        rec = envelopes.decode_usage_record(stored.data)
        assert rec.request_id == stack.records[0].request_id and rec.status == "complete"


# ---- identity: uid, not the client-chosen request id ---------------------------------------------


async def test_two_requests_sharing_a_request_id_are_two_records_in_the_outbox(
    nats_url: str,
) -> None:
    """A reused (or colliding) x-request-id: the outbox de-duplicates on the uid, so both stay."""
    async with running_stack(nats_url, [("a", "eu")], billing="silent") as stack:
        up = stack.upstream
        up.scripts["a"] = up.sse(STREAM_WRITES)
        first = stack.request(request_id="req-reused", uid=uuid.uuid4().hex)
        second = stack.request(request_id="req-reused", uid=uuid.uuid4().hex, key_id="key-2")
        for req in (first, second):
            assert isinstance((await stack.send(req))[-1], ReplyEnd)
        js = stack.nc.jetstream()
        info = await js.stream_info(stack.subjects.outbox_stream)
        assert info.state.messages == 2  # formerly one: the second was dropped as a duplicate
        assert sorted(r.uid for r in stack.records) == sorted([first.uid, second.uid])
        assert {r.request_id for r in stack.records} == {"req-reused"}


async def test_cancel_with_another_uid_leaves_the_request_running(nats_url: str) -> None:
    async with running_stack(nats_url, [("a", "eu")]) as stack:
        up = stack.upstream
        up.scripts["a"] = up.hanging_sse("a", [message_start(input_tokens=40) + BLOCK_START])
        req = stack.request(request_id="req-shared", uid="uid-victim")
        reply_sub = await stack.nc.subscribe(req.reply_to)
        await stack.nc.publish(stack.subjects.route, envelopes.encode(req))
        await reply_sub.next_msg(timeout=3)  # the stream started
        other = CancelRequest(request_id="req-shared", uid="uid-someone-else")
        await stack.nc.publish(stack.subjects.cancel, envelopes.encode(other))
        await asyncio.sleep(0.3)
        assert "uid-victim" in stack.service.handlers.tasks
        assert "a" not in up.disconnected_at
        own = CancelRequest(request_id="req-shared", uid="uid-victim")
        await stack.nc.publish(stack.subjects.cancel, envelopes.encode(own))
        rec = await stack.record_of("req-shared")
        assert (rec.uid, rec.status) == ("uid-victim", "client_closed")
        await reply_sub.unsubscribe()


# ---- count_tokens is never recorded, even cancelled --------------------------------------------


@pytest.mark.parametrize("stopping", [False, True])
async def test_cancelled_count_tokens_records_nothing(nats_url: str, stopping: bool) -> None:
    async with running_stack(nats_url, [("a", "eu")]) as stack:
        answered, release = asyncio.Event(), asyncio.Event()

        async def hang(request: object) -> Any:
            answered.set()
            await release.wait()  # until the test ends (the server's cleanup would wait for it)

        stack.upstream.scripts["a"] = hang
        req = stack.request(api="count_tokens", stream=False)
        await stack.nc.publish(stack.subjects.route, envelopes.encode(req))
        await asyncio.wait_for(answered.wait(), 3)  # the upstream call is under way
        stack.service.router.stopping = stopping  # a replica shutting down cancels it the same
        cancel = CancelRequest(request_id=req.request_id, uid=req.uid)
        await stack.nc.publish(stack.subjects.cancel, envelopes.encode(cancel))
        for _ in range(100):
            if not stack.service.handlers.tasks:
                break
            await asyncio.sleep(0.02)
        assert not stack.service.handlers.tasks
        await asyncio.sleep(0.2)
        release.set()
        assert stack.records == []
        assert stack.service.usage_sink.pending == 0


# ---- an edge that holds the final reply itself (RouteRequest.client_reply_to) -----------------


async def _held_exchange(
    stack: Stack, req: RouteRequest, wait: float = 5.0
) -> tuple[list[Reply], Msg | None]:
    """Route ``req`` from an edge (``client_reply_to``); its replies and the message sent to the
    edge's acknowledgement subject (None if nothing came within ``wait`` seconds)."""
    acks: asyncio.Queue[Msg] = asyncio.Queue()
    sub = await stack.nc.subscribe(bus.ack_subject_of(req.client_reply_to), cb=acks.put)
    try:
        replies = await stack.send(req)
        try:
            ack: Msg | None = await asyncio.wait_for(acks.get(), wait)
        except TimeoutError:
            ack = None
    finally:
        await sub.unsubscribe()
    return replies, ack


async def test_from_an_edge_the_final_reply_carries_the_record_and_the_outbox_acks_the_edge(
    nats_url: str,
) -> None:
    async with running_stack(nats_url, [("a", "eu")], billing="silent") as stack:
        up = stack.upstream
        up.scripts["a"] = up.by_stream(up.sse(STREAM_WRITES, gap=0.01), up.json(RESPONSE))
        for stream in (True, False):
            body = BODY if stream else BODY.replace(b"true", b"false")
            req = stack.request(stream=stream, body=body)
            req.client_reply_to = req.reply_to
            replies, ack = await _held_exchange(stack, req)
            final = replies[-1]
            assert isinstance(final, ReplyEnd if stream else ReplyBody), final
            if isinstance(final, ReplyEnd):
                assert b"message_stop" in final.data
            # The record rides with the final reply, for the receiver's fallback to billing.
            rec = envelopes.decode_usage_record(final.usage)
            assert (rec.uid, rec.request_id, rec.status) == (req.uid, req.request_id, "complete")
            assert rec.output_tokens > 0
            # JetStream stored it and told the receiver, not the router.
            assert ack is not None and outbox.acknowledged(ack, stack.subjects.outbox_stream)
            js = stack.nc.jetstream()
            stored = await js.get_last_msg(
                stack.subjects.outbox_stream, stack.subjects.usage_outbox
            )
            assert stored.data == final.usage
        # Billing's request/reply was never needed (it is silent here).
        assert "ack" not in stack.timeline


async def test_from_an_edge_with_no_outbox_the_edge_hears_it_was_not_stored(
    nats_url: str,
) -> None:
    async with running_stack(nats_url, [("a", "eu")], billing="silent") as stack:
        # The outbox stream's name taken by a stream that does not hold the outbox subject.
        prefix = stack.subjects.prefix
        await stack.nc.jetstream().add_stream(
            name=stack.subjects.outbox_stream, subjects=[f"{prefix}.elsewhere"]
        )
        stack.upstream.scripts["a"] = stack.upstream.json(RESPONSE)
        req = stack.request(stream=False, body=BODY.replace(b"true", b"false"))
        req.client_reply_to = req.reply_to
        replies, ack = await _held_exchange(stack, req, wait=1.0)
        final = replies[-1]
        # The router cannot know: it sends the held body; the receiver gets no acknowledgement
        # (here silence: this test's copy-subscriber on the subject means no "no responders")
        # and must store ``usage`` through billing itself or withhold the body.
        assert isinstance(final, ReplyBody) and final.usage
        assert ack is None or not outbox.acknowledged(ack, stack.subjects.outbox_stream)


async def test_with_no_edge_to_hold_it_nothing_rides_with_the_final_reply(nats_url: str) -> None:
    async with running_stack(nats_url, [("a", "eu")]) as stack:
        stack.upstream.scripts["a"] = stack.upstream.sse(STREAM_WRITES, gap=0.01)
        replies = await stack.send(stack.request())
        assert isinstance(replies[-1], ReplyEnd) and replies[-1].usage == b""
        assert stack.timeline.index("stored") < stack.timeline.index("ReplyEnd")
