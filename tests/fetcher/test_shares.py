"""Fair shares and cancellation end to end: the translator's ``Images`` asking a real
FetchService over a real nats-server, which downloads from a loopback HTTP server that stalls.

Each test counts the hits its own stalled URLs (``/stall?tag=…``) got at the server: a download
that never started is a hit that never came.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass
from typing import Any

import nats
import nats.errors
import pytest
import pytest_asyncio
from ezat_common import bus, envelopes
from ezat_common.errors import GatewayError
from ezat_common.subjects import IMAGES, Subjects
from ezat_fetcher import handlers
from ezat_fetcher.core.addresses import parse_networks
from ezat_fetcher.core.fairness import Limits
from ezat_fetcher.download import Fetcher
from ezat_fetcher.handlers import FetchService
from ezat_translator import images
from ezat_translator.core.openai_messages import ImageUrlPart
from nats.aio.client import Client

from .conftest import ImageServer

# Stalled downloads give up after this (the real fetcher: 15 s): longer than any wait below.
DOWNLOAD_TIMEOUT = 8.0


@dataclass
class Stack:
    translator: Client
    subjects: Subjects
    service: FetchService
    downloads: images.Images | None = None  # one for all the test's requests, as in a translator

    def ask(
        self, urls: list[str], *, key_id: str, uid: str | None = None
    ) -> Awaitable[dict[str, Any]]:
        """The translator's downloads for a body of these image URLs; the body once inlined."""
        body, parts = body_and_parts(urls)

        async def run() -> dict[str, Any]:
            if self.downloads is None:
                claims = bus.Claims(self.translator, self.subjects, IMAGES)
                self.downloads = images.Images(self.translator, self.subjects, claims, "tr-shares")
                await self.downloads.start()
            await self.downloads.inline(
                f"rid-{key_id}",
                body,
                parts,
                key_id=key_id,
                uid=uid if uid is not None else uuid.uuid4().hex,
            )
            return body

        return run()

    async def cancel(self, uid: str) -> None:
        """What the edge broadcasts when the client goes away."""
        cancel = envelopes.CancelRequest(request_id="rid", uid=uid)
        await self.translator.publish(self.subjects.cancel, envelopes.encode(cancel))


async def warm_up(nc: Client, subjects: Subjects) -> None:
    """Until the service answers this connection: right after a subscription on another
    connection, nats-server now and then still answers "no responders" (as in test_handlers).
    An unreadable request is answered at once, with no download."""
    for _ in range(100):
        try:
            await nc.request(subjects.fetch, b"\x93warm-up", timeout=2)
            return
        except nats.errors.NoRespondersError:
            await asyncio.sleep(0.02)
    raise AssertionError("the fetch service never answered")


def body_and_parts(urls: list[str]) -> tuple[dict[str, Any], list[ImageUrlPart]]:
    content = [{"type": "image", "source": {"type": "url", "url": u}} for u in urls]
    parts = [
        ImageUrlPart(f"messages[0].content[{i}].source.url", u, 0, i) for i, u in enumerate(urls)
    ]
    return {"messages": [{"role": "user", "content": content}]}, parts


@contextlib.asynccontextmanager
async def running(nats_url: str, limits: Limits) -> AsyncIterator[Stack]:
    subjects = Subjects(prefix=f"t{uuid.uuid4().hex[:10]}")
    service_nc = await nats.connect(nats_url)
    translator_nc = await nats.connect(nats_url)
    fetcher = Fetcher(parse_networks(["127.0.0.0/8"]), timeout=DOWNLOAD_TIMEOUT)
    service = FetchService(service_nc, subjects, fetcher, limits=limits)
    await service.start()
    await service_nc.flush()
    await warm_up(translator_nc, subjects)
    try:
        yield Stack(translator_nc, subjects, service)
    finally:
        await service.stop(grace=0.5)
        await translator_nc.close()
        await service_nc.close()


@pytest_asyncio.fixture(loop_scope="session")
async def stack(nats_url: str) -> AsyncIterator[Stack]:
    async with running(nats_url, Limits()) as started:
        yield started


async def eventually(check: Any, within: float = 3.0) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, "not reached in time"
        await asyncio.sleep(0.02)


async def stop_all(tasks: list[asyncio.Task[Any]]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_a_flooding_key_does_not_hold_up_another_keys_image(
    stack: Stack, image_server: ImageServer
) -> None:
    tag = f"flood-{uuid.uuid4().hex[:6]}"
    flood = [
        asyncio.create_task(
            stack.ask([image_server.stall_url(tag, i * 20 + j) for j in range(20)], key_id="a")
        )
        for i in range(5)
    ]
    try:
        # The flooding key holds its share of the slots (8 of 32), no more.
        await eventually(lambda: image_server.hits(tag) == Limits().per_key)
        started = time.monotonic()
        body = await asyncio.wait_for(
            stack.ask([image_server.url("/png")], key_id="b"), timeout=DOWNLOAD_TIMEOUT
        )
        waited = time.monotonic() - started
        assert body["messages"][0]["content"][0]["source"]["type"] == "base64"
        assert waited < 1.0, f"the other key's single image waited {waited:.2f} s"
        print(f"the other key's image: {waited * 1000:.0f} ms")
        assert image_server.hits(tag) == Limits().per_key
        assert stack.service.scheduler.queued == 100 - Limits().per_key
        assert not any(t.done() for t in flood)
    finally:
        await stop_all(flood)
    # The translator gave up on them: the fetcher drops the waiting ones and hangs up the rest.
    await eventually(lambda: image_server.active(tag) == 0)
    await asyncio.sleep(0.2)
    assert image_server.hits(tag) == Limits().per_key
    assert stack.service.scheduler.queued == stack.service.scheduler.running == 0


async def test_queued_downloads_of_a_cancelled_request_never_start(
    stack: Stack, image_server: ImageServer
) -> None:
    # The client went away: the edge broadcasts the request's cancel.
    tag = f"cancel-{uuid.uuid4().hex[:6]}"
    uid = uuid.uuid4().hex
    task = asyncio.create_task(
        stack.ask([image_server.stall_url(tag, i) for i in range(20)], key_id="c", uid=uid)
    )
    try:
        await eventually(lambda: image_server.hits(tag) == Limits().per_request)
        await stack.cancel(uid)
        # The fetcher answers at once (so the translator stops waiting) and hangs up the running
        # downloads; the waiting ones never start.
        with pytest.raises(GatewayError) as info:
            await asyncio.wait_for(task, 2.0)
        assert info.value.status == 503
        assert info.value.message.endswith(": the request was cancelled")
        await eventually(lambda: image_server.active(tag) == 0)
        await asyncio.sleep(0.5)
        assert image_server.hits(tag) == Limits().per_request
        assert stack.service.scheduler.queued == stack.service.scheduler.running == 0
    finally:
        await stop_all([task])


async def test_queued_downloads_never_start_after_a_sibling_failed(
    stack: Stack, image_server: ImageServer
) -> None:
    # The translator fails the request on its first failed download: the rest must not start,
    # not even in the slot the failure freed.
    tag = f"fail-{uuid.uuid4().hex[:6]}"
    urls = [image_server.stall_url(tag, i) for i in range(3)]
    # The failure comes once the three before it started (they hold the request's other slots).
    urls.append(image_server.url(f"/status/404?after={tag}:3"))
    urls += [image_server.stall_url(tag, i) for i in range(3, 19)]
    with pytest.raises(GatewayError) as info:
        await asyncio.wait_for(stack.ask(urls, key_id="d"), 3.0)
    assert info.value.status == 400
    assert info.value.message == (
        "messages[0].content[3].source.url: could not download the image (HTTP 404)"
    )
    await eventually(lambda: image_server.active(tag) == 0)
    await asyncio.sleep(0.5)
    assert image_server.hits(tag) == 3
    assert stack.service.scheduler.queued == stack.service.scheduler.running == 0


async def test_downloads_past_the_requests_deadline_are_cut_and_never_start(
    stack: Stack, image_server: ImageServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(images, "FETCH_DEADLINE", 1.0)
    tag = f"late-{uuid.uuid4().hex[:6]}"
    started = time.monotonic()
    with pytest.raises(GatewayError) as info:
        await stack.ask([image_server.stall_url(tag, i) for i in range(20)], key_id="e")
    took = time.monotonic() - started
    assert info.value.status == 503 and info.value.retry_after
    # Whichever answer came first: a running download cut, or a waiting one dropped.
    assert info.value.message.endswith((handlers.LATE, handlers.BUSY))
    assert 0.9 < took < 2.0, took
    await eventually(lambda: image_server.active(tag) == 0)
    await asyncio.sleep(0.3)
    assert image_server.hits(tag) == Limits().per_request
    assert stack.service.scheduler.queued == stack.service.scheduler.running == 0


async def test_a_cancel_that_overtakes_its_request_drops_it(
    stack: Stack, image_server: ImageServer
) -> None:
    # The client left while the translator was still translating: the cancel comes first.
    tag = f"early-{uuid.uuid4().hex[:6]}"
    uid = uuid.uuid4().hex
    await stack.cancel(uid)
    await stack.translator.flush()
    with pytest.raises(GatewayError) as info:
        await asyncio.wait_for(stack.ask([image_server.stall_url(tag)], key_id="f", uid=uid), 2)
    assert info.value.status == 503
    assert image_server.hits(tag) == 0


async def test_a_key_over_its_waiting_limit_is_told_to_retry(
    nats_url: str, image_server: ImageServer
) -> None:
    tag = f"full-{uuid.uuid4().hex[:6]}"
    limits = Limits(total=4, per_key=2, per_request=2, queued_per_key=3)
    async with running(nats_url, limits) as stack:
        held = asyncio.create_task(
            stack.ask([image_server.stall_url(tag, i) for i in range(5)], key_id="g")
        )
        try:
            await eventually(lambda: image_server.hits(tag) == 2)
            assert stack.service.scheduler.queued == 3
            started = time.monotonic()
            with pytest.raises(GatewayError) as info:
                await stack.ask([image_server.stall_url(tag, 9)], key_id="g")
            assert time.monotonic() - started < 0.5
            assert (info.value.status, info.value.retry_after) == (503, handlers.RETRY_AFTER)
            assert info.value.message.endswith(handlers.BUSY)
            # Another key is not refused, and gets a slot at once.
            body = await asyncio.wait_for(stack.ask([image_server.url("/png")], key_id="h"), 1)
            assert body["messages"][0]["content"][0]["source"]["type"] == "base64"
        finally:
            await stop_all([held])
