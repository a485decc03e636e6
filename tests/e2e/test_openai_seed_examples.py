"""Every code example of the seed page runs unchanged (but for the base URL) against the stack."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import Gateway

EXAMPLES = Path(__file__).parent / "seed_examples"


def run_example(gateway: Gateway, name: str) -> str:
    env = {**os.environ, "EZAT_BASE_URL": gateway.url + "/openai/v1", "EZAT_API_KEY": gateway.key}
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


async def test_request_and_response_example(gateway: Gateway) -> None:
    out = await asyncio.to_thread(run_example, gateway, "request_and_response.py")
    text, status = out.strip().splitlines()
    assert len(text) == 12 * 4 - 1  # 12 simulator tokens of 4 characters; print strips nothing
    assert status.startswith("stop CompletionUsage(")
    assert "cached_tokens=0" in status


async def test_streaming_example(gateway: Gateway) -> None:
    out = await asyncio.to_thread(run_example, gateway, "streaming.py")
    assert "CompletionUsage(completion_tokens=12" in out
    assert "total_tokens=" in out


async def test_tools_example_runs_the_whole_loop(gateway: Gateway) -> None:
    out = await asyncio.to_thread(run_example, gateway, "tools.py")
    lines = out.strip().splitlines()
    assert lines[0].startswith("tool_calls [ChatCompletionMessage")
    assert "name='get_weather'" in lines[0]
    assert 'arguments=\'{"city":"Oslo"}\'' in lines[0]
    assert len(lines) == 2 and len(lines[1]) >= 8  # the second call's text answer


@pytest.mark.usefixtures("gateway")
async def test_prompt_caching_example(gateway: Gateway) -> None:
    out = await asyncio.to_thread(run_example, gateway, "prompt_caching.py")
    assert out.startswith("CompletionUsage(")
    assert "cache_write_tokens=0" in out
