"""Handlers (task map, cancels) and UsageSink.record_later without NATS: fakes for both ends."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, cast

import nats.errors
import pytest
from ezat_common import envelopes
from ezat_common.envelopes import CancelRequest, RouteRequest, UsageRecord
from ezat_common.outbox import Outbox
from ezat_common.subjects import Subjects
from ezat_router.handlers import CANCEL_MEMORY_SECONDS, Handlers
from ezat_router.routing import Router
from ezat_router.usage_sink import UsageSink
from nats.aio.client import Client
from nats.aio.msg import Msg
from prometheus_client import REGISTRY

# ---- handlers: identity of a request is its uid -------------------------------------------------


class FakeMsg:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.headers: dict[str, str] | None = None


class FakeRouter:
    """Runs nothing: every request waits until cancelled; remembers which ones were."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.cancelled: list[str] = []

    async def route(self, req: RouteRequest, traceparent: str | None = None) -> None:
        self.started.append(req.uid)
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            self.cancelled.append(req.uid)
            raise


def route(request_id: str, uid: str) -> Msg:
    req = RouteRequest(
        request_id=request_id,
        uid=uid,
        api="messages",
        key_id="k",
        model="m",
        response_model="m",
        stream=True,
        reply_to="_INBOX.x",
        received_at=time.time(),
    )
    return cast(Msg, FakeMsg(envelopes.encode(req)))


def cancel(request_id: str, uid: str = "") -> Msg:
    return cast(Msg, FakeMsg(envelopes.encode(CancelRequest(request_id=request_id, uid=uid))))


def handlers_with(clock: list[float]) -> tuple[Handlers, FakeRouter]:
    router = FakeRouter()
    return Handlers(cast(Router, router), clock=lambda: clock[0]), router


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


@pytest.mark.parametrize(
    ("kind", "handler"), [("route_request", "on_route"), ("cancel", "on_cancel")]
)
async def test_an_undecodable_message_is_counted_and_dropped(kind: str, handler: str) -> None:
    handlers, router = handlers_with([0.0])
    before = undecodable_count(kind)
    junk = Msg(_client=cast(Client, None), subject="ezat.test", data=b"\x93not msgpack")
    await getattr(handlers, handler)(junk)
    await settle()
    assert undecodable_count(kind) == before + 1
    assert not handlers.tasks and not router.started


def undecodable_count(message: str) -> float:
    labels = {"message": message}
    return REGISTRY.get_sample_value("ezat_undecodable_messages_total", labels) or 0.0


async def test_cancel_of_one_uid_leaves_another_request_with_the_same_request_id() -> None:
    handlers, router = handlers_with([0.0])
    await handlers.on_route(route("shared-id", "uid-x"))  # tenant A
    await handlers.on_route(route("shared-id", "uid-y"))  # tenant B, same x-request-id
    await settle()
    assert sorted(handlers.tasks) == ["uid-x", "uid-y"]  # two requests, not one overwritten
    await handlers.on_cancel(cancel("shared-id", "uid-x"))
    await settle()
    assert router.cancelled == ["uid-x"]
    assert list(handlers.tasks) == ["uid-y"]
    await handlers.on_cancel(cancel("shared-id", "uid-y"))
    await settle()
    assert router.cancelled == ["uid-x", "uid-y"] and not handlers.tasks


async def test_a_remembered_cancel_drops_only_its_own_uid() -> None:
    handlers, router = handlers_with([0.0])
    await handlers.on_cancel(cancel("rid", "uid-gone"))  # overtook its request
    await handlers.on_route(route("rid", "uid-retry"))  # the client's retry, same x-request-id
    await handlers.on_route(route("rid", "uid-gone"))
    await settle()
    assert router.started == ["uid-retry"]
    await handlers.on_cancel(cancel("rid", "uid-retry"))
    await settle()


async def test_remembered_cancels_expire() -> None:
    clock = [100.0]
    handlers, router = handlers_with(clock)
    await handlers.on_cancel(cancel("legacy-id"))  # a producer without uid: keyed by request id
    clock[0] += CANCEL_MEMORY_SECONDS + 1
    await handlers.on_route(route("legacy-id", ""))  # much later: a new request, not dropped
    await settle()
    assert router.started == ["legacy-id"]  # decoding gave it the request id as its uid
    await handlers.on_cancel(cancel("legacy-id"))
    await settle()
    assert router.cancelled == ["legacy-id"]


async def test_a_remembered_cancel_within_its_time_drops_the_request() -> None:
    clock = [100.0]
    handlers, router = handlers_with(clock)
    await handlers.on_cancel(cancel("rid", "uid-1"))
    clock[0] += CANCEL_MEMORY_SECONDS - 1
    await handlers.on_route(route("rid", "uid-1"))
    await settle()
    assert router.started == [] and not handlers.tasks


# ---- UsageSink.record_later: retried until durable -----------------------------------------------


class FlakyOutbox:
    """Refuses the first ``down`` puts (JetStream unavailable), then stores."""

    def __init__(self, down: int) -> None:
        self.down = down
        self.puts: list[str] = []
        self.stored: list[str] = []

    async def put(
        self, msg_id: str, data: bytes, timeout: float, traceparent: str | None = None
    ) -> bool:
        self.puts.append(msg_id)
        if len(self.puts) <= self.down:
            return False
        self.stored.append(msg_id)
        return True


class NoBilling:
    """A NATS client on which billing's request/reply has no responder."""

    async def request(self, subject: str, data: bytes, timeout: float, headers: Any = None) -> Any:
        raise nats.errors.NoRespondersError


def sink_with(outbox: FlakyOutbox, **kwargs: float) -> UsageSink:
    return UsageSink(
        cast(Client, NoBilling()),
        Subjects(prefix="t"),
        outbox=cast(Outbox, outbox),
        **kwargs,
    )


def closed_record(**fields: Any) -> UsageRecord:
    base: dict[str, Any] = {
        "request_id": "rid",
        "uid": "uid-1",
        "key_id": "k",
        "model": "m",
        "api": "messages",
        "stream": True,
        "status": "client_closed",
        "input_tokens": 100,
        "output_tokens": 7,
        "estimated": True,
        "received_at": time.time(),
    }
    base.update(fields)
    return UsageRecord(**base)


async def test_record_later_retries_until_the_outbox_is_back() -> None:
    outbox = FlakyOutbox(down=4)
    sink = sink_with(outbox, retry_first=0.01, retry_max=0.04, retry_for=10.0)
    sink.record_later(closed_record())
    for _ in range(200):
        if outbox.stored:
            break
        await asyncio.sleep(0.01)
    assert outbox.stored == ["uid-1"]  # de-duplication key is the uid, not "rid"
    assert len(outbox.puts) == 5
    await asyncio.sleep(0.02)
    assert sink.pending == 0


async def test_record_later_gives_up_after_its_time_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    outbox = FlakyOutbox(down=10**6)
    sink = sink_with(outbox, retry_first=0.01, retry_max=0.02, retry_for=0.1)
    with caplog.at_level(logging.ERROR, logger="ezat.router.billing"):
        sink.record_later(closed_record(uid="uid-lost"))
        for _ in range(100):
            if not sink.pending:
                break
            await asyncio.sleep(0.01)
    assert sink.pending == 0 and len(outbox.puts) > 2
    lost = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert lost and getattr(lost[0], "fields", {})["uid"] == "uid-lost"


async def test_drain_retries_at_once_and_logs_what_stays_undurable(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Long backoff: without the drain waking them, the retries would sleep past the grace.
    outbox = FlakyOutbox(down=1)
    sink = sink_with(outbox, retry_first=30.0, retry_max=30.0)
    sink.record_later(closed_record(uid="uid-ok"))
    await asyncio.sleep(0.05)
    assert outbox.puts == ["uid-ok"] and not outbox.stored
    await sink.drain(2.0)
    assert outbox.stored == ["uid-ok"]  # retried at once when the shutdown began
    assert sink.pending == 0

    dead = FlakyOutbox(down=10**6)
    stuck = sink_with(dead, retry_first=30.0, retry_max=30.0)
    with caplog.at_level(logging.ERROR, logger="ezat.router.billing"):
        stuck.record_later(closed_record(uid="uid-stuck"))
        await asyncio.sleep(0.01)
        started = time.monotonic()
        await stuck.drain(0.3)
        assert time.monotonic() - started < 2.0
    assert len(dead.puts) > 1  # kept trying during the grace period
    errors = [getattr(r, "fields", {}).get("uid") for r in caplog.records if r.levelno >= 40]
    assert "uid-stuck" in errors
    assert stuck.pending == 0
