"""Reload without restart (docs/operations.md, "Changing the config"): `ezat reload` against a
running `ezat up` applies a changed price to the next request while a stream started before it
runs to its end; a file that does not load is refused whole, naming the problem, and the running
config stays."""

from __future__ import annotations

import asyncio
import subprocess
from typing import Any

import anthropic
import pytest
from support.up import EZAT, Up, ezat_up

INSTANT_PRICE = "price = { input = 0.8, output = 4.0 }"

pytestmark = pytest.mark.timeout(300)


async def cost_of_one(client: anthropic.AsyncAnthropic) -> tuple[float, float]:
    """What one request to the instant model costs, and what its tokens cost at the shipped
    price (USD per million: 0.8 input, 4.0 output)."""
    raw = await client.messages.with_raw_response.create(
        model="claude-instant",
        max_tokens=32,
        messages=[{"role": "user", "content": "what does it cost [sim:tokens=10]"}],
    )
    usage = (await raw.parse()).usage
    shipped = (usage.input_tokens * 0.8 + usage.output_tokens * 4.0) / 1e6
    return float(raw.headers["x-ezat-cost-usd"]), shipped


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


async def test_a_new_price_applies_to_the_next_request_and_a_bad_file_is_refused(
    tmp_path: Any,
) -> None:
    with ezat_up(tmp_path) as (up, _):
        shipped = up.config.read_text()
        assert INSTANT_PRICE in shipped
        url, key = up.exports["EZAT_URL"], up.exports["EZAT_API_KEY"]
        async with anthropic.AsyncAnthropic(base_url=url, api_key=key) as client:
            cost, shipped_cost = await cost_of_one(client)
            assert cost == pytest.approx(shipped_cost, abs=1e-6)  # micro-dollars
            started = asyncio.Event()
            in_flight = asyncio.create_task(stream_tokens(client, started))
            await asyncio.wait_for(started.wait(), 30)

            up.config.write_text(
                shipped.replace(INSTANT_PRICE, "price = { input = 8.0, output = 40.0 }")
            )
            done = await reload(up)
            assert done.returncode == 0, done.stdout + done.stderr
            assert "reloaded" in done.stdout
            assert await asyncio.wait_for(in_flight, 60) == 60  # unaffected: every token came
            after, shipped_cost = await cost_of_one(client)
            assert after == pytest.approx(shipped_cost * 10, abs=1e-6)  # the new price

            up.config.write_text(
                shipped.replace("context_window = 100000", 'context_window = "big"')
            )
            done = await reload(up)
            assert done.returncode == 1
            assert "reload refused, the running config stays" in done.stderr
            assert "models[2].context_window" in done.stderr, done.stderr
            assert (await cost_of_one(client))[0] == after  # the config it ran stays
