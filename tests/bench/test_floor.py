"""``bench/floor.py``, the architecture's floor: it must relay what a client would get, never
hang on a failure, and (billed) make every usage record durable before the final bytes, or the
numbers ``run.py`` prints beside the gateway's would flatter the hops.

The three roles run in this test's event loop on the session's real NATS (under their own subject
prefix, so their outbox is not the one the billing tests drain), in front of a real simulator; the
load generator checks every stream's events and end marker and every status.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import nats
import openai
import pytest
import pytest_asyncio
from ezat_cli.infra import free_port
from ezat_common import bus, envelopes
from ezat_common.subjects import Subjects
from ezat_simulator.app import Settings, start
from nats.aio.msg import Msg
from nats.js.api import DiscardPolicy

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import floor
import loadgen

MODEL = "claude-sonnet-5-5"
CONFIG = Path(__file__).resolve().parents[2] / "config" / "ezat.toml"
PREFIX = "floortest"
OUTBOX = f"{PREFIX}_billing_outbox"


async def _floor(nats_url: str, upstream: str) -> AsyncIterator[str]:
    port = free_port()
    stop = asyncio.Event()
    roles = [
        asyncio.create_task(floor.router(stop, upstream)),
        asyncio.create_task(floor.translator(stop)),
        asyncio.create_task(floor.edge(stop, f"127.0.0.1:{port}")),
    ]
    url = f"http://127.0.0.1:{port}"
    try:
        await _until_answering(url, roles)
        yield url
    finally:
        stop.set()
        await asyncio.gather(*roles)
        nc = await nats.connect(nats_url)
        try:
            await nc.jetstream().delete_stream(OUTBOX)
        except nats.js.errors.NotFoundError:
            pass
        await nc.close()


@pytest.fixture
def floor_env(nats_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("NATS_URL", nats_url)
    monkeypatch.setenv("EZAT_SUBJECT_PREFIX", PREFIX)
    # The converting floors' translator reads its models where the services do.
    monkeypatch.setenv("EZAT_CONFIG", str(CONFIG))
    return nats_url


@pytest_asyncio.fixture
async def floor_url(floor_env: str) -> AsyncIterator[str]:
    runner, sim = await start(Settings(), "127.0.0.1", 0)
    async for url in _floor(floor_env, sim):
        yield url
    await runner.cleanup()


async def _until_answering(url: str, roles: list[asyncio.Task[None]]) -> None:
    body = loadgen.request_body("anthropic", False, 1, MODEL)
    async with aiohttp.ClientSession() as s:
        for _ in range(100):
            for task in roles:
                if task.done():
                    task.result()  # a role that failed to start fails the test here
            try:
                async with asyncio.timeout(0.3), s.post(url + "/v1/messages", data=body) as r:
                    if r.status not in (503, 504):  # a 502 is an answer: the roles are up
                        return
            except (TimeoutError, aiohttp.ClientError):
                pass
            await asyncio.sleep(0.05)
    raise AssertionError("the floor never answered")


def target(url: str, path: str, stream: bool, extra: str = "") -> loadgen.Target:
    body = loadgen.request_body("anthropic", stream, 5, MODEL, extra)
    headers = loadgen.headers_for("anthropic", "k")
    return loadgen.Target(url + path, headers, body, stream, "anthropic")


async def phase(t: loadgen.Target, conc: int, requests: int) -> dict:  # type: ignore[type-arg]
    async with asyncio.timeout(30):  # a floor that hangs fails here, not at the suite's limit
        return await loadgen.run_phase(t, conc, 60, warmup=0, requests=requests, timeout=10)


PATHS = ["/v1/messages", "/openai/v1/messages", "/billed/v1/messages"]


@pytest.mark.parametrize("path", PATHS)
async def test_streams_arrive_whole_on_every_path(floor_url: str, path: str) -> None:
    result = await phase(target(floor_url, path, True), 8, 40)
    assert result["ok"] == 40 and result["errors"] == 0
    # message_start, content_block_start, 5 deltas, content_block_stop, message_delta, message_stop
    assert result["events"] == 40 * 10


@pytest.mark.parametrize("path", PATHS)
async def test_a_reply_is_the_simulators_reply(floor_url: str, path: str) -> None:
    body = loadgen.request_body("anthropic", False, 5, MODEL)
    async with aiohttp.ClientSession() as s, s.post(floor_url + path, data=body) as r:
        assert r.status == 200
        reply = json.loads(await r.read())
    assert reply["type"] == "message" and reply["usage"]["output_tokens"] == 5


async def test_billed_requests_leave_one_durable_record_each(floor_url: str, nats_url: str) -> None:
    await phase(target(floor_url, "/billed/v1/messages", True), 4, 12)
    await phase(target(floor_url, "/billed/v1/messages", False), 4, 8)
    nc = await nats.connect(nats_url)
    try:
        js = nc.jetstream()
        info = await js.stream_info(OUTBOX)
        assert info.state.messages == 20
        sub = await js.pull_subscribe(f"{PREFIX}.billing.usage.outbox", stream=OUTBOX)
        records = [envelopes.decode_usage_record(m.data) for m in await sub.fetch(20, timeout=5)]
    finally:
        await nc.close()
    assert sorted(r.stream for r in records) == [False] * 8 + [True] * 12
    # Counted from the stream's own usage (the router's pure core), not assumed.
    assert {(r.model, r.output_tokens, r.status) for r in records} == {(MODEL, 5, "complete")}


@pytest.mark.parametrize("path", PATHS)
async def test_an_upstream_error_status_reaches_the_client(floor_url: str, path: str) -> None:
    for stream in (False, True):
        result = await phase(target(floor_url, path, stream, " status=529"), 2, 4)
        assert result["error_kinds"] == {"http 529": 4}


@pytest.mark.parametrize("path", PATHS)
async def test_a_stream_cut_upstream_ends_without_its_end_marker(floor_url: str, path: str) -> None:
    result = await phase(target(floor_url, path, True, " drop_after=2"), 2, 4)
    assert result["ok"] == 0
    assert result["error_kinds"] == {"stream ended without its end marker": 4}


async def test_an_unreachable_upstream_is_a_502(floor_env: str) -> None:
    async for url in _floor(floor_env, f"http://127.0.0.1:{free_port()}"):
        for path in PATHS:
            result = await phase(target(url, path, True), 2, 4)
            assert result["error_kinds"] == {"http 502": 4}


async def test_a_billed_reply_ends_only_once_its_record_is_stored(
    floor_url: str, nats_url: str
) -> None:
    # An outbox that takes three records and refuses the rest (as a full one does).
    nc = await nats.connect(nats_url)
    try:
        await nc.jetstream().add_stream(
            name=OUTBOX,
            subjects=[f"{PREFIX}.billing.usage.outbox"],
            max_msgs=3,
            discard=DiscardPolicy.NEW,
        )
    finally:
        await nc.close()
    streams = await phase(target(floor_url, "/billed/v1/messages", True), 1, 5)
    assert streams["ok"] == 3
    assert streams["error_kinds"] == {"stream ended without its end marker": 2}
    replies = await phase(target(floor_url, "/billed/v1/messages", False), 1, 2)
    assert replies["error_kinds"] == {"http 500": 2}


def _replies(*msgs: tuple[bool, bytes]) -> tuple[floor.Relay, asyncio.Queue[Msg]]:
    """A relay whose queue holds ``msgs``: (an outbox acknowledgement?, data) for request 1."""
    names = Subjects(prefix=PREFIX)
    inbox = bus.Inbox(None, names, "t")  # type: ignore[arg-type]
    queue: asyncio.Queue[Msg] = asyncio.Queue()
    for ack, data in msgs:
        subject = inbox.ack_subject("1") if ack else names.inbox("t") + ".1"
        queue.put_nowait(Msg(_client=None, subject=subject, data=data))  # type: ignore[arg-type]
    return floor.Relay(None, queue, inbox, OUTBOX, billed=True), queue  # type: ignore[arg-type]


STORED = (True, json.dumps({"stream": OUTBOX, "seq": 7}).encode())
REFUSED = (True, json.dumps({"error": {"code": 503, "description": "full"}}).encode())
REPLY = (False, b"B200{}")


@pytest.mark.parametrize(
    ("order", "status"),
    [
        ([STORED, REPLY], 200),  # the PubAck overtook the reply
        ([REPLY, STORED], 200),
        ([REFUSED, REPLY], 500),  # a refusal seen before the reply still counts
        ([REPLY, REFUSED], 500),
        ([REPLY], 500),  # no PubAck at all: given up after ACK_TIMEOUT, as the edge does
    ],
)
async def test_a_billed_body_waits_for_the_outboxs_verdict_in_any_order(
    order: list[tuple[bool, bytes]], status: int
) -> None:
    relay, _ = _replies(*order)
    async with asyncio.timeout(floor.ACK_TIMEOUT + 2):
        resp = await relay.answer()
    assert resp.status == status


# ---- the converting floors (floor_convert.py) ------------------------------------------------


async def test_the_converting_floors_answer_the_openai_sdk(floor_url: str) -> None:
    """What ``floor-openai-converted`` and ``floor-responses-converted`` time is a whole answer
    in the client's own API, read by its own SDK, or their numbers would flatter the floor."""
    prompt = "Tell me about the quick brown fox. [sim:tokens=5]"
    async with openai.AsyncOpenAI(base_url=floor_url + "/openai-converted/v1", api_key="k") as c:
        whole = await c.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": prompt}], max_tokens=64
        )
        text = whole.choices[0].message.content
        assert text and whole.usage is not None and whole.usage.completion_tokens == 5
        chunks = await c.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": prompt}],
            max_tokens=64,
            stream=True,
        )
        pieces = [ch.choices[0].delta.content or "" async for ch in chunks if ch.choices]
        assert "".join(pieces) == text

        answer = await c.responses.create(model=MODEL, input=prompt, store=False)
        assert answer.output_text == text and answer.usage is not None
        assert answer.usage.output_tokens == 5
        events = await c.responses.create(model=MODEL, input=prompt, store=False, stream=True)
        kinds = [event.type async for event in events]
        assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
        assert kinds.count("response.output_text.delta") == 5


async def test_a_converting_floor_refuses_what_the_gateway_refuses(floor_url: str) -> None:
    async with openai.AsyncOpenAI(base_url=floor_url + "/openai-converted/v1", api_key="k") as c:
        with pytest.raises(openai.BadRequestError, match="messages"):
            await c.chat.completions.create(model=MODEL, messages=[], max_tokens=8)


async def test_converted_requests_are_billed_once_each(floor_url: str, nats_url: str) -> None:
    for wire, path in (("openai", "chat/completions"), ("responses", "responses")):
        for stream in (True, False):
            body = loadgen.request_body(wire, stream, 5, MODEL)
            t = loadgen.Target(
                f"{floor_url}/openai-converted/v1/{path}",
                loadgen.headers_for(wire, "k"),
                body,
                stream,
                wire,
            )
            result = await phase(t, 2, 4)
            assert result["ok"] == 4 and result["errors"] == 0
    nc = await nats.connect(nats_url)
    try:
        info = await nc.jetstream().stream_info(OUTBOX)
    finally:
        await nc.close()
    assert info.state.messages == 16
