"""Reload without restart (docs/operations.md, "Changing the config"): `ezat reload` against a
running `ezat up` signals each service, which reloads in process: no service pid changes, a
changed price applies to the next request (its answer's cost and its stored row) while a stream
started before it runs to its end, a new model is listed and usable; a file that does not load
is refused whole, naming the problem, and the running config stays; a setting read only at a
start is applied by a rolling restart."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import aiohttp
import anthropic
import pytest
from support.up import EZAT, Up, ezat_up

INSTANT_PRICE = "price = { input = 0.8, output = 4.0 }"
NEW_MODEL = """
[[models]]
id = "anthropic/claude-reloaded-sim"
aliases = ["claude-reloaded"]
context_window = 100000
max_output_tokens = 8192
price = { input = 1.0, output = 2.0 }

[[deployments]]
name = "local-reloaded"
model = "anthropic/claude-reloaded-sim"
base_url = "BASE"
api_key = "sim-key"
region = "local"
"""

pytestmark = pytest.mark.timeout(300)


async def cost_of_one(
    client: anthropic.AsyncAnthropic, model: str = "claude-instant"
) -> tuple[float, float, str]:
    """What one request costs (its header), what its tokens cost at the shipped price of the
    instant model (USD per million: 0.8 input, 4.0 output), and its request id."""
    raw = await client.messages.with_raw_response.create(
        model=model,
        max_tokens=32,
        messages=[{"role": "user", "content": "what does it cost [sim:tokens=10]"}],
    )
    usage = (await raw.parse()).usage
    shipped = (usage.input_tokens * 0.8 + usage.output_tokens * 4.0) / 1e6
    return float(raw.headers["x-ezat-cost-usd"]), shipped, raw.headers["request-id"]


async def row_cost(url: str, key: str, rid: str) -> float:
    """The stored row's ``cost_usd`` (``/api/usage``), once billing stored it."""
    async with aiohttp.ClientSession() as http:
        for _ in range(100):
            async with http.get(f"{url}/api/usage?limit=50", headers={"x-api-key": key}) as r:
                page = await r.json()
            found = [i["cost_usd"] for i in page["data"] if i["request_id"] == rid]
            if found:
                return float(found[0])
            await asyncio.sleep(0.1)
    raise AssertionError(f"no row for {rid}")


async def stream_tokens(client: anthropic.AsyncAnthropic, started: asyncio.Event) -> int:
    deltas = 0
    async with client.messages.stream(
        model="claude-sonnet-5-5",
        max_tokens=128,
        messages=[{"role": "user", "content": "slow [sim:tokens=60] [sim:token_ms=150]"}],
    ) as stream:
        async for event in stream:
            if event.type == "content_block_delta":
                deltas += 1
                started.set()
        final = await stream.get_final_message()
    assert final.stop_reason == "end_turn"
    return deltas


async def reload(up: Up) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(
        subprocess.run,
        [EZAT, "reload"],
        env=up.env,
        capture_output=True,
        text=True,
        timeout=240,
    )


def service_pids(up: Up) -> dict[str, int]:
    entries = json.loads((Path(up.env["EZAT_DATA_DIR"]) / "pids.json").read_text())
    return {e["name"]: e["pid"] for e in entries if e["service"] and "sim" not in e["name"]}


async def test_a_reload_applies_in_process_and_a_bad_file_is_refused(tmp_path: Any) -> None:
    with ezat_up(tmp_path) as (up, _):
        shipped = up.config.read_text()
        assert INSTANT_PRICE in shipped
        pids = service_pids(up)
        assert {"edge", "router", "translator", "billing", "fetcher"} <= set(pids)
        url, key = up.exports["EZAT_URL"], up.exports["EZAT_API_KEY"]
        async with anthropic.AsyncAnthropic(base_url=url, api_key=key) as client:
            cost, shipped_cost, _ = await cost_of_one(client)
            assert cost == pytest.approx(shipped_cost, abs=1e-6)  # micro-dollars
            assert "claude-reloaded" not in str(await client.models.list())
            started = asyncio.Event()
            in_flight = asyncio.create_task(stream_tokens(client, started))
            await asyncio.wait_for(started.wait(), 30)

            base = re.search(r'base_url = "(http://127\.0\.0\.1:\d+)"', shipped)
            assert base is not None
            changed = shipped.replace(INSTANT_PRICE, "price = { input = 8.0, output = 40.0 }")
            up.config.write_text(changed + NEW_MODEL.replace("BASE", base.group(1)))
            done = await reload(up)
            assert done.returncode == 0, done.stdout + done.stderr
            assert "reloaded (in place)" in done.stdout
            assert await asyncio.wait_for(in_flight, 60) == 60  # unaffected: every token came
            after, shipped_cost, rid = await cost_of_one(client)
            assert after == pytest.approx(shipped_cost * 10, abs=1e-6)  # the new price
            assert await row_cost(url, key, rid) == after  # the stored row too
            listed = [m.id for m in (await client.models.list()).data]
            assert "anthropic/claude-reloaded-sim" in listed
            new_cost, _, _ = await cost_of_one(client, "claude-reloaded")
            assert new_cost > 0
            assert service_pids(up) == pids  # nothing was restarted

            up.config.write_text(
                shipped.replace("context_window = 100000", 'context_window = "big"')
            )
            done = await reload(up)
            assert done.returncode == 1
            assert "reload refused, the running config stays" in done.stderr
            assert "models[2].context_window" in done.stderr, done.stderr
            assert (await cost_of_one(client))[0] == after  # the config it ran stays
            assert service_pids(up) == pids

            # A setting read only at a start: every service replaced in turn, none lost.
            up.config.write_text(changed.replace("[edge]", "[edge]\nmax_in_flight = 1000", 1))
            done = await reload(up)
            assert done.returncode == 0, done.stdout + done.stderr
            assert "reloaded (rolling restart)" in done.stdout
            assert (await cost_of_one(client))[0] == after
            assert set(service_pids(up).values()).isdisjoint(pids.values())
