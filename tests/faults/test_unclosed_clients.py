"""The unclosed-client guard (support/unclosed.py) fails a run that leaves a client to the garbage
collector, and names where it was made. A tiny suite runs in a pytest process of its own, with
and without the guard: each test asks a stand-in aiohttp server (no gateway) through one client
(the Anthropic SDK, the OpenAI SDK, an aiohttp session), then drops it, closed or not, and
collects it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.unclosed import MESSAGE

TESTS = Path(__file__).resolve().parents[1]

SUITE = """
import asyncio
import gc

import aiohttp
import anthropic
import openai
import pytest
from aiohttp import web

CLOSE = {close}


async def models(request: web.Request) -> web.Response:
    return web.json_response({{"object": "list", "data": [], "has_more": False}})


async def ask(kind: str, url: str) -> None:
    if kind == "aiohttp":
        client = aiohttp.ClientSession()
        (await client.get(url + "/v1/models")).release()
    elif kind == "anthropic":
        client = anthropic.AsyncAnthropic(base_url=url, api_key="k", max_retries=0)
        await client.models.list()
    else:
        client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="k", max_retries=0)
        await client.models.list()
    if CLOSE:
        await client.close()
    del client
    gc.collect()  # the SDK clients are cycles: only a collection frees them


async def scenario(kind: str) -> None:
    app = web.Application()
    app.router.add_get("/v1/models", models)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        await ask(kind, "http://127.0.0.1:%d" % runner.addresses[0][1])
    finally:
        await runner.cleanup()


@pytest.mark.parametrize("kind", ["anthropic", "openai", "aiohttp"])
def test_one_request(kind: str) -> None:
    asyncio.run(scenario(kind))
"""


def run_suite(folder: Path, close: bool, guard: bool) -> subprocess.CompletedProcess[str]:
    (folder / "test_tiny.py").write_text(SUITE.format(close=close))
    plugins = ["-p", "support.unclosed"] if guard else []
    path = os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    return subprocess.run(
        # -rN: no short summary, whose lines pytest cuts to the terminal's width but not under CI
        [sys.executable, "-m", "pytest", "-q", "-rN", "-p", "no:cacheprovider", *plugins,
         "-c", os.devnull,
         "-o", "asyncio_default_fixture_loop_scope=function",
         "--rootdir", str(folder), str(folder / "test_tiny.py")],
        capture_output=True, text=True, env=env, cwd=folder, timeout=90, check=False,
    )  # fmt: skip


def test_a_client_collected_unclosed_fails_the_run_and_is_named(tmp_path: Path) -> None:
    run = run_suite(tmp_path, close=False, guard=True)
    out = run.stdout + run.stderr
    assert run.returncode == pytest.ExitCode.TESTS_FAILED, out
    assert "3 passed, 3 errors" in out, out
    assert out.count(MESSAGE) == 3, out
    for made in (
        "anthropic._base_client.AsyncHttpxClientWrapper made at",
        "openai._base_client.AsyncHttpxClientWrapper made at",
        "aiohttp.client.ClientSession made at",
    ):
        assert f"{made} {tmp_path / 'test_tiny.py'}:" in out, out


def test_closed_clients_pass(tmp_path: Path) -> None:
    run = run_suite(tmp_path, close=True, guard=True)
    out = run.stdout + run.stderr
    assert run.returncode == pytest.ExitCode.OK, out
    assert "3 passed" in out and MESSAGE not in out, out


def test_without_the_guard_the_same_leaks_pass_unnoticed(tmp_path: Path) -> None:
    """What the guard adds: nothing else in a run fails on these leaks."""
    run = run_suite(tmp_path, close=False, guard=False)
    out = run.stdout + run.stderr
    assert run.returncode == pytest.ExitCode.OK, out
    assert "3 passed" in out and MESSAGE not in out, out
