"""The translator's image downloads (``Images``) over a real nats-server, against a scripted
fetcher: the 32 MB running total, cancellation of sibling downloads, and a wait that follows the
fetcher's heartbeats (docs/reliability.md).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import nats
import nats.errors
import pytest
import pytest_asyncio
from ezat_common import envelopes, liveness
from ezat_common.errors import GatewayError
from ezat_common.subjects import Subjects
from ezat_translator import images
from ezat_translator.core.openai_messages import ImageUrlPart
from nats.aio.client import Client
from nats.aio.msg import Msg

WARM_UP = b"warm-up"


async def warm_up(nc: Client, subjects: Subjects) -> None:
    """Until the scripted fetcher answers: right after a subscription on another connection,
    nats-server now and then still answers "no responders" (seen about 1 in 60 here)."""
    for _ in range(100):
        try:
            await nc.request(subjects.fetch, WARM_UP, timeout=2)
            return
        except nats.errors.NoRespondersError:
            await asyncio.sleep(0.02)
    raise AssertionError("the scripted fetcher never answered")


@dataclass
class Plan:
    """How the scripted fetcher answers one URL: after ``delay`` s (None: never), beating every
    ``beat`` s meanwhile (None: silent)."""

    delay: float | None
    result: envelopes.FetchResult | None = None
    beat: float | None = None


@dataclass
class ScriptedFetcher:
    nc: Client
    subjects: Subjects
    plan: dict[str, Plan]
    asked: list[envelopes.FetchRequest] = field(default_factory=list)
    cancels: list[envelopes.CancelRequest] = field(default_factory=list)
    tasks: set[asyncio.Task[None]] = field(default_factory=set)

    async def start(self, asker: Client) -> None:
        await self.nc.subscribe(self.subjects.fetch, cb=self._on_fetch)
        await self.nc.subscribe(self.subjects.cancel, cb=self._on_cancel)
        await self.nc.flush()
        await warm_up(asker, self.subjects)

    async def _on_fetch(self, msg: Msg) -> None:
        if msg.data == WARM_UP:
            await msg.respond(b"")
            return
        task = asyncio.create_task(self._answer(msg))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _on_cancel(self, msg: Msg) -> None:
        self.cancels.append(envelopes.decode_cancel(msg.data))

    async def _answer(self, msg: Msg) -> None:
        ask = envelopes.decode_fetch_request(msg.data)
        self.asked.append(ask)
        plan = self.plan[ask.url]
        loop = asyncio.get_running_loop()
        until = loop.time() + (plan.delay if plan.delay is not None else 3600)
        while loop.time() < until:
            step = min(plan.beat or 3600, until - loop.time())
            await asyncio.sleep(step)
            if plan.beat is not None and loop.time() < until:
                await self.nc.publish(msg.reply, envelopes.encode(envelopes.Heartbeat()))
        assert plan.result is not None
        await msg.respond(envelopes.encode(plan.result))

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


@pytest_asyncio.fixture(loop_scope="session")
async def conns(nats_url: str) -> AsyncIterator[tuple[Client, Client, Subjects]]:
    translator = await nats.connect(nats_url)
    fetcher = await nats.connect(nats_url)
    try:
        yield translator, fetcher, Subjects(prefix=f"t{uuid.uuid4().hex[:10]}")
    finally:
        await translator.close()
        await fetcher.close()


async def scripted(
    conns: tuple[Client, Client, Subjects], plan: dict[str, Plan]
) -> ScriptedFetcher:
    translator_nc, fetcher_nc, subjects = conns
    fetcher = ScriptedFetcher(fetcher_nc, subjects, plan)
    await fetcher.start(translator_nc)
    return fetcher


class Claims:
    async def open(self) -> None:
        pass

    async def unpack(self, data: bytes, ref: str | None) -> bytes:
        return data


def ok(size: int) -> envelopes.FetchResult:
    return envelopes.FetchResult(request_id="r", ok=True, media_type="image/png", data=b"x" * size)


def body_and_parts(n: int) -> tuple[dict[str, Any], list[ImageUrlPart]]:
    content = [{"type": "image", "source": {"type": "url", "url": f"u{i}"}} for i in range(n)]
    parts = [ImageUrlPart(f"messages[0].content[{i}].source.url", f"u{i}", 0, i) for i in range(n)]
    return {"messages": [{"role": "user", "content": content}]}, parts


async def run(
    conns: tuple[Client, Client, Subjects],
    body: dict[str, Any],
    parts: list[ImageUrlPart],
    uid: str = "uid-1",
) -> None:
    translator, _, subjects = conns
    downloads = images.Images(translator, subjects, Claims(), "tr-images")  # type: ignore[arg-type]
    await downloads.start()
    try:
        await downloads.inline("r", body, parts, key_id="key_1", uid=uid)
    finally:
        await downloads.stop()


async def test_first_failure_cancels_the_other_downloads(
    conns: tuple[Client, Client, Subjects],
) -> None:
    body, parts = body_and_parts(3)
    failed = envelopes.FetchResult(request_id="r", ok=False, error="could not download (HTTP 404)")
    fetcher = await scripted(
        conns, {"u0": Plan(5.0, ok(10)), "u1": Plan(0.01, failed), "u2": Plan(5.0, ok(10))}
    )
    started = asyncio.get_running_loop().time()
    try:
        with pytest.raises(GatewayError) as info:
            await run(conns, body, parts, uid="uid-failed")
        assert asyncio.get_running_loop().time() - started < 1.0
        assert info.value.message == (
            "messages[0].content[1].source.url: could not download (HTTP 404)"
        )
        assert info.value.status == 400
        # The fetcher is told to drop the request's other downloads.
        await asyncio.sleep(0.1)
        assert [(c.uid, c.request_id) for c in fetcher.cancels] == [("uid-failed", "r")]
    finally:
        await fetcher.stop()


async def test_the_32_mb_total_is_enforced_as_downloads_arrive(
    conns: tuple[Client, Client, Subjects], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(images, "MAX_TOTAL_BYTES", 100)
    body, parts = body_and_parts(3)
    fetcher = await scripted(
        conns, {"u0": Plan(0.01, ok(60)), "u1": Plan(0.05, ok(60)), "u2": Plan(5.0, ok(1))}
    )
    try:
        with pytest.raises(GatewayError) as info:
            await run(conns, body, parts)
        assert info.value.status == 400
        assert info.value.message.startswith("messages[0].content[1].source.url: ")
        assert "32 MB" in info.value.message
        await asyncio.sleep(0.1)
        assert [c.uid for c in fetcher.cancels] == ["uid-1"]
    finally:
        await fetcher.stop()


async def test_all_downloads_inline_their_blocks_including_tool_results(
    conns: tuple[Client, Client, Subjects],
) -> None:
    body = {
        "messages": [
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "content": [{"type": "image", "source": {"type": "url", "url": "a"}}],
                    },
                    {"type": "image", "source": {"type": "url", "url": "b"}},
                ],
            }
        ]
    }
    parts = [ImageUrlPart("p0", "a", 0, 0, 0), ImageUrlPart("p1", "b", 0, 1)]
    fetcher = await scripted(conns, {"a": Plan(0.02, ok(3)), "b": Plan(0.0, ok(3))})
    try:
        await run(conns, body, parts)
    finally:
        await fetcher.stop()
    content = body["messages"][0]["content"]
    for block in (content[0]["content"][0], content[1]):  # type: ignore[index]
        assert block["source"] == {"type": "base64", "media_type": "image/png", "data": "eHh4"}
    # Nothing left to cancel: no broadcast.
    assert fetcher.cancels == []


async def test_each_download_carries_the_key_uid_deadline_and_asks_for_heartbeats(
    conns: tuple[Client, Client, Subjects],
) -> None:
    body, parts = body_and_parts(2)
    fetcher = await scripted(conns, {"u0": Plan(0.0, ok(1)), "u1": Plan(0.0, ok(1))})
    try:
        await run(conns, body, parts, uid="uid-7")
    finally:
        await fetcher.stop()
    assert sorted(a.url for a in fetcher.asked) == ["u0", "u1"]
    for ask in fetcher.asked:
        assert (ask.key_id, ask.uid, ask.heartbeat, ask.fail_together) == (
            "key_1",
            "uid-7",
            True,
            True,
        )
        assert images.FETCH_DEADLINE - 1 < ask.timeout <= images.FETCH_DEADLINE


async def test_heartbeats_keep_the_wait_alive_past_the_owner_timeout(
    conns: tuple[Client, Client, Subjects], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(liveness, "OWNER_TIMEOUT", 0.5)
    body, parts = body_and_parts(1)
    fetcher = await scripted(conns, {"u0": Plan(1.5, ok(3), beat=0.1)})
    try:
        await run(conns, body, parts)
    finally:
        await fetcher.stop()
    assert body["messages"][0]["content"][0]["source"]["data"] == "eHh4"


async def test_a_silent_fetcher_is_given_up_on_after_the_owner_timeout(
    conns: tuple[Client, Client, Subjects], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Subscribed (so no "no responders"), but it never answers and never beats: it died.
    monkeypatch.setattr(liveness, "OWNER_TIMEOUT", 0.5)
    body, parts = body_and_parts(1)
    fetcher = await scripted(conns, {"u0": Plan(None)})
    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        with pytest.raises(GatewayError) as info:
            await run(conns, body, parts)
    finally:
        await fetcher.stop()
    assert 0.45 < loop.time() - started < 1.5
    assert (info.value.status, info.value.retry_after) == (503, 2)
    assert info.value.message == (
        "messages[0].content[0].source.url: the image could not be downloaded right now; "
        "retry shortly"
    )


async def test_a_busy_fetcher_is_a_503_with_its_retry_after(
    conns: tuple[Client, Client, Subjects],
) -> None:
    body, parts = body_and_parts(1)
    busy = envelopes.FetchResult(
        request_id="r", ok=False, error="the fetcher is busy", retry_after=3
    )
    fetcher = await scripted(conns, {"u0": Plan(0.0, busy)})
    try:
        with pytest.raises(GatewayError) as info:
            await run(conns, body, parts)
    finally:
        await fetcher.stop()
    assert (info.value.status, info.value.retry_after, info.value.param) == (
        503,
        3,
        "messages[0].content[0].source.url",
    )
    assert info.value.message == "messages[0].content[0].source.url: the fetcher is busy"


async def test_without_the_requests_uid_the_fetcher_gets_one_of_our_own(
    conns: tuple[Client, Client, Subjects],
) -> None:
    # Never the client-chosen request id alone: other requests may share it, and the fetcher
    # drops every download of the identity it is told to cancel.
    body, parts = body_and_parts(2)
    failed = envelopes.FetchResult(request_id="r", ok=False, error="could not download (HTTP 404)")
    fetcher = await scripted(conns, {"u0": Plan(0.0, failed), "u1": Plan(5.0, ok(1))})
    try:
        with pytest.raises(GatewayError):
            await run(conns, body, parts, uid="")
        await asyncio.sleep(0.1)
    finally:
        await fetcher.stop()
    uids = {a.uid for a in fetcher.asked}
    assert len(uids) == 1 and uids != {""} and uids != {"r"}
    assert [c.uid for c in fetcher.cancels] == list(uids)
