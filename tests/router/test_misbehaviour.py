"""Upstream misbehaviour that is not an error answer (issue 13), through the real router on NATS
with a fake deployment: a connection never answered, headers then silence, a stream that stops
without message_stop and keeps the connection open, a 200 HTML page. Each ends within its
configured bound, fails over while nothing was sent, and leaves no charge."""

from __future__ import annotations

import time

import pytest
from ezat_common.envelopes import (
    Heartbeat,
    Reply,
    ReplyBody,
    ReplyEnd,
    ReplyError,
    ReplyHead,
    RouteRequest,
)

from .fake_upstream import BLOCK_START, STREAM_WRITES, message_start, text_delta
from .test_forwarder import Stack, running_stack

# Short bounds so each case takes well under a second or two.
FAST = {
    "stream_first_byte_timeout": 0.6,
    "first_byte_timeout": 1.5,
    "between_events_timeout": 0.8,
}
JSON_BODY = b'{"max_tokens":10,"messages":[{"role":"user","content":"hi"}]}'


async def send(stack: Stack, req: RouteRequest) -> tuple[list[Reply], float]:
    """The request's replies (heartbeats left out: a wait over a second gets them) and how long
    it took."""
    started = time.monotonic()
    replies = await stack.send(req)
    return [r for r in replies if not isinstance(r, Heartbeat)], time.monotonic() - started


MESSAGE = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "upstream-x",
    "content": [{"type": "text", "text": "Hello"}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 3, "output_tokens": 1},
}


async def test_stream_never_answered_fails_over_within_the_stream_first_byte_bound(
    nats_url: str,
) -> None:
    async with running_stack(nats_url, [("a", "eu"), ("b", "us")], **FAST) as stack:
        up = stack.upstream
        up.scripts["a"] = up.never_answer()
        up.scripts["b"] = up.sse(STREAM_WRITES, gap=0.0)
        replies, elapsed = await send(stack, stack.request())
        assert isinstance(replies[0], ReplyHead) and isinstance(replies[-1], ReplyEnd)
        assert replies[0].headers["x-ezat-deployment"] == "b"
        # The stream bound (0.6 s), not first_byte_timeout (1.5 s), cut the silent attempt.
        assert 0.6 <= elapsed < 1.3, elapsed
        assert stack.service.shared.health("a").failures == 1


async def test_stream_headers_then_silence_fails_over_within_the_same_bound(
    nats_url: str,
) -> None:
    """The headers came in time, message_start never did: still nothing was sent to the client,
    so it fails over once the stream bound from the attempt's start has passed (a ping before
    message_start does not extend it; the per-read bound, 2 s here, is not what ends it)."""
    slow_reads = {**FAST, "between_events_timeout": 2.0}
    async with running_stack(nats_url, [("a", "eu"), ("b", "us")], **slow_reads) as stack:
        up = stack.upstream
        up.scripts["a"] = up.silent_after([b'event: ping\ndata: {"type":"ping"}\n\n'])
        up.scripts["b"] = up.sse(STREAM_WRITES, gap=0.0)
        replies, elapsed = await send(stack, stack.request())
        assert replies[0].headers["x-ezat-deployment"] == "b"  # type: ignore[union-attr]
        assert isinstance(replies[-1], ReplyEnd)
        assert 0.6 <= elapsed < 1.3, elapsed


async def test_every_deployment_silent_is_a_timeout_error_and_no_record(nats_url: str) -> None:
    async with running_stack(nats_url, [("a", "eu"), ("b", "us")], **FAST) as stack:
        up = stack.upstream
        up.scripts["a"] = up.never_answer()
        up.scripts["b"] = up.silent_after([])
        req = stack.request()
        ([reply], elapsed) = await send(stack, req)
        assert isinstance(reply, ReplyError)
        assert (reply.status, reply.type) == (504, "timeout_error")
        assert "within 0.6 seconds" in reply.message
        assert 1.2 <= elapsed < 2.0, elapsed  # two attempts of 0.6 s
        assert stack.records == []  # nothing was produced: nothing recorded


async def test_stream_stalling_midway_ends_with_a_timeout_error_and_a_failed_record(
    nats_url: str,
) -> None:
    async with running_stack(nats_url, [("a", "eu"), ("b", "us")], **FAST) as stack:
        up = stack.upstream
        up.scripts["a"] = up.silent_after([message_start() + BLOCK_START, text_delta("Hi")])
        up.scripts["b"] = up.sse(STREAM_WRITES)
        req = stack.request()
        replies, elapsed = await send(stack, req)
        assert isinstance(replies[0], ReplyHead)
        error = replies[-1]
        assert isinstance(error, ReplyError)
        assert (error.status, error.type) == (504, "timeout_error")
        assert "sent nothing for 0.8 seconds" in error.message
        assert "not charged" in error.message
        assert 0.8 <= elapsed < 1.5, elapsed
        assert up.calls_to("b") == []  # bytes reached the client: no failover
        # docs/billing.md: a stream that started and broke is recorded as failed (cost 0).
        rec = await stack.record_of(req.request_id)
        assert (rec.status, rec.error_type, rec.input_tokens) == ("failed", "timeout_error", 25)
        assert stack.service.shared.health("a").failures == 1


@pytest.mark.parametrize("stream", [True, False])
async def test_a_200_html_page_is_a_protocol_error_and_fails_over_at_once(
    nats_url: str, stream: bool
) -> None:
    """Known from the content-type: no byte of the page is waited for, even when its connection
    stays open (the per-read bound, 2 s here, never comes into play)."""
    slow_reads = {**FAST, "between_events_timeout": 2.0}
    async with running_stack(nats_url, [("a", "eu"), ("b", "us")], **slow_reads) as stack:
        up = stack.upstream
        up.scripts["a"] = up.html(keep_open=True)
        up.scripts["b"] = up.sse(STREAM_WRITES, gap=0.0) if stream else up.json(MESSAGE)
        req = stack.request(stream=stream, **({} if stream else {"body": JSON_BODY}))
        replies, elapsed = await send(stack, req)
        assert isinstance(replies[-1], ReplyEnd if stream else ReplyBody)
        assert isinstance(replies[0], ReplyHead | ReplyBody)
        assert replies[0].headers["x-ezat-deployment"] == "b"
        assert len(up.calls_to("a")) == 1 and len(up.calls_to("b")) == 1
        assert stack.service.shared.health("a").failures == 1
        assert elapsed < 0.5, elapsed


async def test_html_everywhere_is_a_malformed_response_error_and_no_record(
    nats_url: str,
) -> None:
    async with running_stack(nats_url, [("a", "eu"), ("b", "us")], **FAST) as stack:
        up = stack.upstream
        up.scripts["a"] = up.scripts["b"] = up.html()
        for stream in (True, False):
            req = stack.request(stream=stream, **({} if stream else {"body": JSON_BODY}))
            [reply], _ = await send(stack, req)
            assert isinstance(reply, ReplyError)
            assert (reply.status, reply.type) == (500, "api_error")
            assert "malformed response" in reply.message
        assert stack.records == []


async def test_non_stream_waits_first_byte_timeout_for_its_headers_then_fails_over(
    nats_url: str,
) -> None:
    """A non-streamed answer's headers come with the whole answer: the longer bound applies."""
    async with running_stack(nats_url, [("a", "eu"), ("b", "us")], **FAST) as stack:
        up = stack.upstream
        up.scripts["a"] = up.never_answer()
        up.scripts["b"] = up.json(MESSAGE)
        replies, elapsed = await send(stack, stack.request(stream=False, body=JSON_BODY))
        assert isinstance(replies[-1], ReplyBody)
        assert 1.5 <= elapsed < 2.3, elapsed


async def test_non_stream_body_stalling_fails_over(nats_url: str) -> None:
    async with running_stack(nats_url, [("a", "eu"), ("b", "us")], **FAST) as stack:
        up = stack.upstream
        up.scripts["a"] = up.silent_after([b'{"id":"msg_1",'], "application/json")
        up.scripts["b"] = up.json(MESSAGE)
        replies, elapsed = await send(stack, stack.request(stream=False, body=JSON_BODY))
        assert isinstance(replies[-1], ReplyBody)
        assert 0.8 <= elapsed < 1.6, elapsed
        assert stack.service.shared.health("a").failures == 1
        # Both stall: the client hears that the deployment went silent, and is not charged.
        up.scripts["b"] = up.scripts["a"]
        req = stack.request(stream=False, body=JSON_BODY)
        ([reply], _) = await send(stack, req)
        assert isinstance(reply, ReplyError)
        assert (reply.status, reply.type) == (504, "timeout_error")
        assert "sent nothing for 0.8 seconds" in reply.message
        assert [r for r in stack.records if r.request_id == req.request_id] == []
