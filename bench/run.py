"""``make bench``: the gateway against the simulator alone, side by side, in one run.

    python bench/run.py [--quick] [--duration S] [--levels 1,32,256] [--soak SECONDS]
                        [--profile DIR] [--no-micro] [--no-floor] [--out bench/results.json]

1. The micro-suite (``bench/micro``, pytest-benchmark): µs per request and per stream event of
   the translation core, before anything else runs.
2. The stack starts on a zero-latency simulator (``stackrun.Systems``), and a second simulator
   alone is the direct baseline. For each mode (non-streaming, streaming with 20-token replies)
   and concurrency level, one load generator (``loadgen.py``) drives the direct simulator, then
   the gateway's Anthropic API, then its OpenAI API, then the simulator's Bedrock face alone and
   the Anthropic API to a Bedrock-kind deployment, each time-boxed after a warm-up. CPU seconds
   per service are read around each gateway phase and RSS is sampled throughout. "budget" is the
   Anthropic API with a key that has a budget (each request holds in Redis). Then both
   deployment kinds at the same paced rate (``kinds.py``), for CPU per request like for like;
   then the Redis commands per request of each key, under MONITOR (``redis_trips.py``).
3. 1,000 slow streams held open at once through the gateway: the whole stack's RSS.
   Then ``floor.py`` (the same hops doing no work, or only the mandatory work, on the same NATS,
   simulator and billing) in the same modes and levels, each after the direct simulator again
   (``--no-floor`` skips it): its rows say what the architecture itself costs on this machine,
   and "CPU ms per request" sets the gateway's CPU beside it.
4. ``--soak S``: mixed load for S seconds, RSS growth per service.
5. ``--profile DIR``: py-spy on the edge, translator, router and billing under c=32 load.

It prints the tables (``report.render``) and writes ``bench/results.json``. Numbers are noisy on
a busy machine; they are never asserted by ``make test``.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import nats
import nats.errors
from ezat_common.subjects import from_env
from nats.aio.client import Client

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import kind_phases as kinds  # noqa: E402
import loadgen  # noqa: E402
import memory  # noqa: E402
import profile_services  # noqa: E402
import redis_trips  # noqa: E402
import report  # noqa: E402
from procstat import Sampler, cpu_delta, rss_mb  # noqa: E402
from stackrun import BEDROCK_MODEL, MODEL, MODES, SERVICES, STACK_GROUPS, Systems  # noqa: E402

# The gateway's phases: the three client APIs, the Anthropic API with a key that has a budget
# ("budget": each request holds its worst case in Redis), and the Anthropic API to a Bedrock-kind
# deployment.
APIS = ("anthropic", "budget", "openai", "responses", "bedrock")
OPENAI_PATHS = {"openai": "/openai/v1/chat/completions", "responses": "/openai/v1/responses"}

OUTBOX_STREAM = from_env().outbox_stream
FLOORS = {
    "floor": "/v1/messages",
    "floor-openai": "/openai/v1/messages",
    "floor-billed": "/billed/v1/messages",
    "floor-openai-billed": "/openai-billed/v1/messages",
    "floor-openai-converted": "/openai-converted/v1/chat/completions",
    "floor-responses-converted": "/openai-converted/v1/responses",
}
# The floors that translate (floor_convert.py): each takes and answers its API's format.
FLOOR_WIRE = {"floor-openai-converted": "openai", "floor-responses-converted": "responses"}
NOT_AVAILABLE = "n/a (not implemented)"
FLOOR_START_SECONDS = 30.0


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="~1-minute smoke run")
    p.add_argument("--duration", type=float, help="measured seconds per phase (default 8)")
    p.add_argument("--warmup", type=float, help="warm-up seconds per phase (default 1)")
    p.add_argument("--levels", help="concurrency levels, comma-separated (default 1,32,256)")
    p.add_argument("--tokens", type=int, default=20, help="reply length of every request")
    p.add_argument(
        "--open-streams", type=int, default=1000, help="streams held open at once (0: skip)"
    )
    p.add_argument("--soak", type=float, default=0.0, help="soak seconds (600: the 10-min soak)")
    p.add_argument("--profile", type=Path, help="py-spy the services into this folder")
    p.add_argument("--profile-seconds", type=float, default=15.0)
    p.add_argument("--no-micro", action="store_true", help="skip the pytest-benchmark suite")
    p.add_argument("--out", type=Path, default=HERE / "results.json")
    p.add_argument("--keep", action="store_true", help="keep the stack's data folder and logs")
    p.add_argument(
        "--no-floor", dest="floor", action="store_false", help="skip floor.py (the bare hops)"
    )
    p.add_argument(
        "--bedrock-auth",
        choices=("sigv4", "key"),
        default="sigv4",
        help="the Bedrock-kind phases' auth: SigV4 (default) or a Bedrock API key",
    )
    args = p.parse_args()
    args.duration = args.duration or (1.5 if args.quick else 8.0)
    args.warmup = args.warmup if args.warmup is not None else (0.5 if args.quick else 1.0)
    args.levels = [int(x) for x in (args.levels or "1,32,256").split(",")]
    return args


# ---- micro-suite -----------------------------------------------------------------------------


def run_micro(quick: bool) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "micro.json"
        cmd = [sys.executable, "-m", "pytest", str(HERE / "micro"), "-q", "-p", "no:cacheprovider"]
        cmd += ["--benchmark-only", f"--benchmark-json={out}", "--benchmark-disable-gc"]
        cmd += ["--benchmark-max-time", "0.2" if quick else "1.0"]
        proc = subprocess.run(cmd, cwd=HERE.parent, capture_output=True, text=True)
        if proc.returncode != 0 or not out.exists():
            print(proc.stdout[-3000:], proc.stderr[-2000:], sep="\n", file=sys.stderr)
            return [{"name": "micro-suite failed", "median_us": None, "mean_us": None,
                     "stddev_us": None, "rounds": proc.returncode}]  # fmt: skip
        data = json.loads(out.read_text())
    return [
        {
            "name": b["name"].removeprefix("test_"),
            "median_us": round(b["stats"]["median"] * 1e6, 2),
            "mean_us": round(b["stats"]["mean"] * 1e6, 2),
            "stddev_us": round(b["stats"]["stddev"] * 1e6, 2),
            "rounds": b["stats"]["rounds"],
        }
        for b in data["benchmarks"]
    ]


# ---- load phases -----------------------------------------------------------------------------


async def wait_until_answered(
    url: str, body: bytes, seconds: float, name: str, pause: float = 0.1
) -> None:
    """POST ``body`` until a 200 comes back. A floor's edge listens before its translator and
    router have subscribed and answers 502 at once until then, so the wait is bounded by time,
    not by a number of attempts."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    async with aiohttp.ClientSession() as s:
        while loop.time() < deadline:
            try:
                async with asyncio.timeout(0.5), s.post(url, data=body) as r:
                    if r.status == 200:
                        return
            except (TimeoutError, aiohttp.ClientError):
                pass
            await asyncio.sleep(pause)
    raise RuntimeError(f"{name} did not answer within {seconds:g} s")


class Bench:
    def __init__(self, systems: Systems, args: argparse.Namespace) -> None:
        self.sys = systems
        self.args = args
        self.group = systems.groups()
        self.results: dict[str, Any] = {"phases": {}, "levels": args.levels}
        self.available: dict[tuple[str, str], str] = {}  # (api, mode) -> why skipped
        self._nc: Client | None = None
        self._js: Any = None

    def target(self, api: str, mode: str, extra: str = "", tokens: int | None = None):  # type: ignore[no-untyped-def]
        stream = mode == "stream"
        model = BEDROCK_MODEL if api == "bedrock" else MODEL
        wire = FLOOR_WIRE.get(api, api)
        body = loadgen.request_body(wire, stream, tokens or self.args.tokens, model, extra)
        if api == kinds.DIRECT_BEDROCK:
            return kinds.direct_bedrock(self.sys.direct_url, stream, body, self.args.bedrock_auth)
        if api in ("direct", report.FLOOR_DIRECT):
            url = self.sys.direct_url + "/v1/messages"
            return loadgen.Target(url, loadgen.headers_for("anthropic", "sim"), body, stream)
        if api in FLOORS:
            # Anthropic bytes end to end, unless the floor translates (its API's, then).
            url = self.sys.floor_url + FLOORS[api]
            if api in FLOOR_WIRE:
                return loadgen.Target(url, loadgen.headers_for(wire, "sim"), body, stream, wire)
            return loadgen.Target(url, loadgen.headers_for("anthropic", "sim"), body, stream)
        path = OPENAI_PATHS.get(api, "/v1/messages")
        # "bedrock": the Anthropic API to a Bedrock-kind deployment (event-stream decoding).
        if api not in OPENAI_PATHS:
            wire = "anthropic"
        key = self.sys.budget_key if api == "budget" else self.sys.key
        headers = loadgen.headers_for(wire, key)
        return loadgen.Target(self.sys.gateway_url + path, headers, body, stream, wire)

    async def probe(self) -> None:
        """Which gateway APIs answer at all; also warms every code path once."""
        async with aiohttp.ClientSession() as s:
            for api in APIS:
                for mode in MODES:
                    t = self.target(api, mode)
                    async with s.post(t.url, data=t.body, headers=t.headers) as r:
                        text = await r.text()
                    if r.status == 400 and "not available" in text:
                        self.available[(api, mode)] = NOT_AVAILABLE
                    elif r.status >= 300:
                        print(f"probe {api}/{mode}: {r.status} {text[:200]}", file=sys.stderr)
        self.results["apis"] = list(APIS)
        self.results["floors"] = list(FLOORS) if self.args.floor else []
        for api in self.results["floors"]:
            await self._wait_floor(api)

    async def _wait_floor(self, api: str) -> None:
        target = self.target(api, "json")
        await wait_until_answered(target.url, target.body, FLOOR_START_SECONDS, api)

    async def phase(
        self, api: str, mode: str, conc: int, name: str | None = None, rate: float | None = None
    ) -> None:
        """One phase of ``api``, kept in ``results["phases"]`` under ``name`` (by default its
        mode, api and concurrency); closed-loop, or paced at ``rate`` requests a second."""
        name = name or report.key(mode, api, conc)
        if (api, mode) in self.available:
            self.results["phases"][name] = {"skipped": self.available[(api, mode)]}
            return
        marks: dict[str, Any] = {}
        mark = lambda: marks.setdefault("before", self.group.snapshot())  # noqa: E731
        result = await loadgen.run_phase(
            self.target(api, mode),
            conc,
            self.args.duration,
            self.args.warmup,
            on_start=mark,
            rate=rate,
        )
        if not api.startswith("direct"):
            await self._outbox_drained()
        after = self.group.snapshot()
        if not api.startswith("direct") and "before" in marks:
            cpu = cpu_delta(marks["before"], after)
            result["cpu_s"] = cpu
            ok = max(result["ok"], 1)
            result["cpu_ms_per_request"] = {n: round(c * 1000 / ok, 3) for n, c in cpu.items()}
        self.results["phases"][name] = result
        tail = f"ttft p50 {result.get('ttft_p50_ms')}" if mode == "stream" else ""
        print(
            f"  {name:<24} {result['per_s']:>8}/s  p50 {result['p50_ms']} ms  {tail}"
            f"  errors {result['errors']}+{result['warmup_errors']}",
            flush=True,
        )

    async def _outbox_drained(self, limit: float = 15.0) -> None:
        """Billing drains the outbox a little after the replies went out: wait for it, so that
        work counts in the phase whose records it stores, and the next phase starts clean."""
        if self._js is None:
            assert self.sys.stack is not None and self.sys.stack.infra is not None
            self._nc = await nats.connect(self.sys.stack.infra.nats_url)
            self._js = self._nc.jetstream()
        end = time.monotonic() + limit
        while time.monotonic() < end:
            try:
                info = await self._js.stream_info(OUTBOX_STREAM)
            except nats.errors.Error:
                return  # no outbox (yet): nothing to drain
            if not info.state.messages:
                return
            await asyncio.sleep(0.05)

    async def load_phases(self) -> None:
        sampler = Sampler(self.group, STACK_GROUPS)
        sampler.start()
        for mode in MODES:
            for conc in self.args.levels:
                for api in ("direct", *self.results["apis"]):
                    if api == "bedrock":
                        await self.phase(kinds.DIRECT_BEDROCK, mode, conc)
                    await self.phase(api, mode, conc)
        await sampler.stop()
        cpu: dict[str, dict[str, float]] = {}
        for api in APIS:
            for mode in MODES:
                p = self.results["phases"].get(report.key(mode, api, 32), {})
                if "cpu_ms_per_request" in p:
                    cpu[f"{api[:4]}/{mode}"] = p["cpu_ms_per_request"]
        self.results["resources"]["rss_load_peak_mb"] = sampler.peak
        self.results["resources"]["cpu_ms_per_request"] = cpu

    async def kind_phases(self) -> None:
        """The Anthropic and the Bedrock kind at the same paced rate (``kinds.py``)."""
        await kinds.kind_phases(self.phase, MODES)
        self.results["kinds"] = kinds.summary(
            self.results["phases"],
            MODES,
            lambda p: report.cpu_per_request(p, "bedrock", SERVICES),
            lambda p, name: p.get("cpu_ms_per_request", {}).get(name),
        )

    async def redis_phase(self) -> None:
        """Redis commands per request (``redis_trips.py``) of the Anthropic API, non-streaming
        at c=8, with the unbudgeted key, then with the budgeted one."""
        assert self.sys.stack is not None and self.sys.stack.infra is not None
        url = self.sys.stack.infra.redis_url
        if not url:
            return
        n = 50 if self.args.quick else 400
        counts = []
        for api in ("anthropic", "budget"):

            async def send(api: str = api) -> int:
                done = await loadgen.run_phase(self.target(api, "json"), 8, 120.0, 0, requests=n)
                return int(done["ok"])

            counts.append(
                await redis_trips.count(url, self.group.roots, send, self._outbox_drained)
            )
        self.results["redis"] = redis_trips.summary(*counts)

    async def floor_phases(self) -> None:
        """The floors, in a pass of their own after the open streams: the billed floor's records
        grow PostgreSQL and the outbox, which must not count in the gateway's memory."""
        for mode in MODES:
            for conc in self.args.levels:
                for api in (report.FLOOR_DIRECT, *self.results["floors"]):
                    await self.phase(api, mode, conc)

    async def run(self) -> dict[str, Any]:
        await self.probe()
        await asyncio.sleep(2)
        idle = rss_mb(self.group.snapshot())
        self.results["resources"] = {"rss_idle_mb": idle}
        print("load phases (direct, then each gateway API, the Bedrock kind last):", flush=True)
        await self.load_phases()
        if "bedrock" in self.results["apis"]:
            print("the deployment kinds at the same rate:", flush=True)
            await self.kind_phases()
        print("Redis commands per request, without and with a budget ...", flush=True)
        await self.redis_phase()
        await memory.open_streams(self)
        if self.results["floors"]:
            print("the floors (direct again, then each floor):", flush=True)
            await self.floor_phases()
        if self.args.soak:
            print(f"soak: {self.args.soak} s", flush=True)
            await memory.soak(self, self.args.soak)
        if self.args.profile:
            print(f"profiling into {self.args.profile}", flush=True)
            self.results["profile"] = await profile_services.profile(
                self.args.profile,
                {n: self.group.roots[n][0] for n in ("edge", "translator", "router", "billing")},
                {mode: self.target(profile_services.PROFILE_API, mode) for mode in MODES},
                self.args.profile_seconds,
            )
        if self._nc is not None:
            await self._nc.close()
        return self.results


def main() -> None:
    args = _args()
    loadgen.raise_nofile(65536)  # the stack's processes inherit it
    began = time.monotonic()
    micro: list[dict[str, Any]] = []
    if not args.no_micro:
        print("micro-suite (pytest-benchmark, bench/micro) ...", flush=True)
        micro = run_micro(args.quick)
    print("starting the stack and the direct simulator ...", flush=True)
    systems = Systems(with_floor=args.floor, bedrock_auth=args.bedrock_auth)
    if not args.keep:
        # Registered before the stack starts, so it runs after pgserver's own exit hook (LIFO).
        atexit.register(shutil.rmtree, systems.folder, ignore_errors=True)
    try:
        systems.start()
        print(f"  gateway {systems.gateway_url}, direct {systems.direct_url}", flush=True)
        results = loadgen.run_on_uvloop(Bench(systems, args).run())
    finally:
        systems.stop()
    results["micro"] = micro
    results["meta"] = {
        "summary": f"{os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{args.duration:g} s per phase after {args.warmup:g} s warm-up, "
        f"{time.strftime('%Y-%m-%d %H:%M')}, load average {os.getloadavg()[0]:.2f}",
        "tokens": args.tokens,
        "services": SERVICES,
        "wall_seconds": round(time.monotonic() - began, 1),
        "data_dir": str(systems.folder),
    }
    args.out.write_text(json.dumps(results, indent=2))
    print()
    print(report.render(results))
    print(f"\nwrote {args.out} in {results['meta']['wall_seconds']} s")


if __name__ == "__main__":
    main()
