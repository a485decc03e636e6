"""``bench/floor.py``, the architecture's floor: it must relay what a client would get, or the
numbers ``run.py --floor`` prints next to the gateway's would flatter the hops.

The three roles run in this test's event loop on the session's real NATS, in front of a real
simulator; the load generator checks every stream's events and end marker and every status.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
import pytest_asyncio
from ezat_cli.infra import free_port
from ezat_simulator.app import Settings, start

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import floor
import loadgen

MODEL = "claude-sonnet-5-5"


@pytest_asyncio.fixture
async def floor_url(nats_url: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[str]:
    monkeypatch.setenv("NATS_URL", nats_url)
    runner, sim = await start(Settings(), "127.0.0.1", 0)
    port = free_port()
    stop = asyncio.Event()
    roles = [
        asyncio.create_task(floor.router(stop, sim)),
        asyncio.create_task(floor.translator(stop)),
        asyncio.create_task(floor.edge(stop, f"127.0.0.1:{port}")),
    ]
    url = f"http://127.0.0.1:{port}"
    await _until_answering(url, roles)
    yield url
    stop.set()
    await asyncio.gather(*roles)
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
                    if r.status == 200:
                        return
            except (TimeoutError, aiohttp.ClientError):
                pass
            await asyncio.sleep(0.05)
    raise AssertionError("the floor never answered")


def target(url: str, path: str, stream: bool, extra: str = "") -> loadgen.Target:
    body = loadgen.request_body("anthropic", stream, 5, MODEL, extra)
    headers = loadgen.headers_for("anthropic", "k")
    return loadgen.Target(url + path, headers, body, stream, "anthropic")


@pytest.mark.parametrize("path", ["/v1/messages", "/openai/v1/messages"])
async def test_streams_arrive_whole_on_both_paths(floor_url: str, path: str) -> None:
    result = await loadgen.run_phase(target(floor_url, path, True), 8, 60, warmup=0, requests=40)
    assert result["ok"] == 40 and result["errors"] == 0
    # message_start, content_block_start, 5 deltas, content_block_stop, message_delta, message_stop
    assert result["events"] == 40 * 10


@pytest.mark.parametrize("path", ["/v1/messages", "/openai/v1/messages"])
async def test_a_reply_is_the_simulators_reply(floor_url: str, path: str) -> None:
    body = loadgen.request_body("anthropic", False, 5, MODEL)
    async with aiohttp.ClientSession() as s, s.post(floor_url + path, data=body) as r:
        assert r.status == 200
        reply = json.loads(await r.read())
    assert reply["type"] == "message" and reply["usage"]["output_tokens"] == 5


async def test_an_upstream_error_status_reaches_the_client(floor_url: str) -> None:
    t = target(floor_url, "/v1/messages", False, " status=529")
    result = await loadgen.run_phase(t, 2, 60, warmup=0, requests=4)
    assert result["error_kinds"] == {"http 529": 4}
