"""``make bench`` end to end, at its smallest: the program starts its own stack, drives every
phase (the direct simulator, the three gateway APIs, the Anthropic API with a key that has a
budget and the Redis commands its holds add, the Bedrock kind after the simulator's Bedrock
face alone, both kinds at the same paced rate, the floors after their own direct run), and
writes results the report can judge. Timings are not asserted, only that every phase ran clean
and was measured.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))
import kind_phases  # noqa: E402
import redis_trips  # noqa: E402
import run  # noqa: E402

APIS = ["direct", "anthropic", "budget", "openai", "responses", "direct-bedrock", "bedrock"]
APIS += ["direct-floor", "floor", "floor-openai", "floor-billed", "floor-openai-billed"]


def test_a_quick_bench_measures_every_phase(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    # Its own embedded infrastructure, never the test session's.
    env = {k: v for k, v in os.environ.items() if not k.endswith("_URL")}
    args = [sys.executable, str(BENCH / "run.py"), "--quick", "--no-micro", "--levels", "1"]
    args += ["--duration", "0.5", "--warmup", "0.2", "--open-streams", "0", "--out", str(out)]
    proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    results = json.loads(out.read_text())
    for mode in ("json", "stream"):
        for api in APIS:
            phase = results["phases"][f"{mode}/{api}/c1"]
            assert phase["ok"] > 0 and phase["errors"] == 0 and phase["warmup_errors"] == 0
            if not api.startswith("direct"):
                assert phase["cpu_ms_per_request"]["nats"] > 0  # both sides ran over NATS
    # Both deployment kinds at the same paced rate, each mode, every round: measured and clean.
    for mode in ("json", "stream"):
        for api in kind_phases.KINDS:
            for r in range(kind_phases.KIND_ROUNDS):
                phase = results["phases"][kind_phases.kind_key(mode, api, r)]
                assert phase["ok"] > 0 and phase["errors"] == 0 and phase["warmup_errors"] == 0
                assert phase["per_s"] <= kind_phases.KIND_RATES[mode] * 1.02
        assert results["kinds"][mode]["cpu_ratio"] > 0
    assert "Targets" in proc.stdout and "Reference, not targets" in proc.stdout
    assert "CPU ms per request" in proc.stdout and "bedrock / anthropic" in proc.stdout
    assert "responses: added p50 c=1 within 0.3 ms of openai's (json)" in proc.stdout
    # The key with a budget: each admission holds with exactly one script call of the edge's,
    # counted by Redis (MONITOR); the key without one holds nothing.
    redis = results["redis"]
    assert redis["requests"] == {"plain": 50, "budget": 50}, redis
    assert redis["admission_added_per_request"] == 1.0, redis
    assert redis["commands"][redis_trips.ADMISSION]["plain"] == 0.0, redis
    hold = r"a budget hold adds <= 1 Redis round trip to admission\s+1\.00 per request\s+PASS"
    assert re.search(hold, proc.stdout), proc.stdout[-3000:]
    assert "Budget holds: the Anthropic API" in proc.stdout


@pytest.mark.parametrize(
    ("command", "name"),
    [
        (f"evalsha {redis_trips._sha(redis_trips.RESERVE)} 4 a b", "EVALSHA hold-reserve"),
        (f"EVALSHA {redis_trips._sha(redis_trips.SHORTEN)} 3 a", "EVALSHA hold-shorten"),
        (f"EVALSHA {redis_trips._sha(redis_trips.COUNT)} 0 p", "EVALSHA spend-count"),
        ("EVALSHA 0123456789abcdef 0", "EVALSHA 01234567"),
        ("hgetall ezat:deployments", "HGETALL"),
        ("PING", "PING"),
    ],
)
def test_redis_commands_are_named_by_their_script(command: str, name: str) -> None:
    assert redis_trips.command_name(command) == name


def test_redis_summary_subtracts_the_unbudgeted_key() -> None:
    plain = {"requests": 10, "per_request": {"billing: X": 1.0}, "total_per_request": 1.0}
    budget = {
        "requests": 9,
        "per_request": {"billing: X": 1.0, redis_trips.ADMISSION: 1.0, "edge: Y": 1.0},
        "total_per_request": 3.0,
    }
    got = redis_trips.summary(plain, budget)
    assert got["added_per_request"] == 2.0 and got["edge_added_per_request"] == 2.0
    assert got["admission_added_per_request"] == 1.0
    assert got["commands"]["billing: X"] == {"plain": 1.0, "budget": 1.0, "added": 0.0}


async def test_waiting_for_a_floor_outlasts_its_quick_refusals() -> None:
    """A floor's edge answers 502 at once until its router subscribed: the bench waits for a
    200 for a time, not for a number of attempts (it gave up after 100 quick 502s before)."""
    seen = 0

    async def edge(request: web.Request) -> web.Response:
        nonlocal seen
        seen += 1
        return web.Response(status=200 if seen > 150 else 502)

    app = web.Application()
    app.router.add_post("/", edge)
    async with TestServer(app) as server:
        await run.wait_until_answered(str(server.make_url("/")), b"{}", 60, "floor", pause=0.001)
    assert seen == 151
    async with TestServer(web.Application()) as server:  # 404 forever: it gives up in time
        with pytest.raises(RuntimeError, match=r"did not answer within 0\.3 s"):
            await run.wait_until_answered(str(server.make_url("/")), b"{}", 0.3, "floor")
