"""Fixtures for the simulator tests: an in-process instance on a free port and an SDK client."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import anthropic
import pytest_asyncio
from ezat_simulator.app import SIM, Settings, Simulator, start

StartSim = Callable[..., Awaitable["Running"]]


class Running:
    """A started simulator: its URL, its state, and clients to call it."""

    def __init__(self, url: str, sim: Simulator, http: aiohttp.ClientSession) -> None:
        self.url = url
        self.sim = sim
        self.http = http
        # A short timeout: an in-process simulator answers in milliseconds, so a stuck call
        # should fail this test quickly and visibly rather than wait out pytest-timeout.
        self.client = anthropic.AsyncAnthropic(
            base_url=url, api_key="test-key", max_retries=0, timeout=15.0
        )

    async def admin(self, method: str, path: str, body: Any = None) -> Any:
        async with self.http.request(method, self.url + path, json=body) as resp:
            assert resp.status == 200, await resp.text()
            return await resp.json()

    async def requests(self, limit: int = 100) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = await self.admin("GET", f"/_sim/requests?limit={limit}")
        return result


@pytest_asyncio.fixture(loop_scope="function")
async def start_sim() -> AsyncIterator[StartSim]:
    runners = []
    started: list[Running] = []
    http = aiohttp.ClientSession()

    async def _start(**settings: Any) -> Running:
        runner, url = await start(Settings(**settings), "127.0.0.1", 0)
        runners.append(runner)
        started.append(Running(url, runner.app[SIM], http))
        return started[-1]

    yield _start
    for running in started:
        await running.client.close()
    await http.close()
    for runner in runners:
        await runner.cleanup()


@pytest_asyncio.fixture(loop_scope="function")
async def sim(start_sim: StartSim) -> Running:
    return await start_sim()


SEARCHED = [{"role": "user", "content": "look it up [sim:web_search=3 web_fetch=1]"}]
_COUNTS = anthropic.types.ServerToolUsage(web_search_requests=3, web_fetch_requests=1)
# What ``server_tool_use`` returns from every face: the counts wherever the final usage is,
# none in message_start (as Anthropic's API).
REPORTED = [_COUNTS, None, _COUNTS, _COUNTS]


async def server_tool_use(client: Any, model: str, **extra: Any) -> list[Any]:
    """What the SDK ``client`` (any face's) reads of ``SEARCHED``'s server tools: from the body,
    then from a stream's message_start, its message_delta and the SDK's final message."""
    args = {"model": model, "max_tokens": 50, "messages": SEARCHED, **extra}
    body = await client.messages.create(**args)
    said = [body.usage.server_tool_use]
    async with client.messages.stream(**args) as stream:
        async for event in stream:
            if event.type == "message_start":
                said.append(event.message.usage.server_tool_use)
            elif event.type == "message_delta":
                said.append(event.usage.server_tool_use)
        said.append((await stream.get_final_message()).usage.server_tool_use)
    return said
