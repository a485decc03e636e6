"""A lean HTTP load generator for the EZAT benchmark (uvloop, ``ezat_http1``).

Each of ``concurrency`` workers sends the same pre-encoded request again and again over a
keep-alive connection of its own (from the phase's pool) until the phase's deadline (or its
request budget) is spent; with ``rate``, the workers share one schedule of at most ``rate``
request starts a second (paced, so two targets can be compared at the same load). Replies are
HTTP-decoded but not JSON-parsed: a non-streaming reply is read whole; a stream's body is
scanned as bytes as it arrives, counting events (SSE's blank lines, or an AWS event stream's
chunk headers for a Bedrock face answered directly), noting the time of the first content delta
and of the end. Both times
are taken in the client's protocol callback (``on_body``), so they exclude the wait for the
worker task to resume. Any non-2xx status, exception, ``event: error`` or stream without its end
marker counts as an error.

As a library: ``await run_phase(Target(...), concurrency=32, duration=5)``. As a program:

    python bench/loadgen.py --url http://127.0.0.1:8080/v1/messages --key KEY \
        [--api anthropic|openai] [--stream] [--concurrency 32] [--duration 10] [--tokens 20]

prints one JSON object with the phase's numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import resource
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ezat_http1 import Origin, Pool, UpstreamError, post_head
from reply_scan import FIRST, Reply, StreamScan

KEEPALIVE_SECONDS = 60.0


def raise_nofile(wanted: int = 65536) -> int:
    """Raise this process's open-file limit towards ``wanted`` (children inherit it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def request_body(
    api: str, stream: bool, tokens: int = 20, model: str = "claude-sonnet-5-5", extra: str = ""
) -> bytes:
    """A small request whose reply the simulator makes exactly ``tokens`` tokens long."""
    text = f"Tell me about the quick brown fox. [sim:tokens={tokens}{extra}]"
    if api == "responses":
        # The Responses API's equivalent, not stored (as the Codex CLI sends it).
        body: dict[str, Any] = {"model": model, "max_output_tokens": 256, "input": text}
        body["store"] = False
        if stream:
            body["stream"] = True
        return json.dumps(body, separators=(",", ":")).encode()
    body = {
        "model": model,
        "max_tokens": 256,
        "messages": [{"role": "user", "content": text}],
    }
    if stream:
        body["stream"] = True
    return json.dumps(body, separators=(",", ":")).encode()


def headers_for(api: str, key: str) -> dict[str, str]:
    if api in ("openai", "responses"):
        return {"authorization": f"Bearer {key}", "content-type": "application/json"}
    return {"x-api-key": key, "anthropic-version": "2023-06-01", "content-type": "application/json"}


@dataclass(frozen=True)
class Target:
    """Where to send, what, and how to recognise a stream's first delta and its end."""

    url: str
    headers: dict[str, str]
    body: bytes
    stream: bool
    api: str = "anthropic"  # the reply format (anthropic, openai, eventstream): which markers


@dataclass
class Samples:
    """Raw observations of one phase (nanoseconds)."""

    latency: list[int] = field(default_factory=list)  # request sent -> reply complete
    ttft: list[int] = field(default_factory=list)  # request sent -> first content delta
    events: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    error_sample: str = ""


def percentile(values: list[int], q: float) -> float | None:
    """Nearest-rank percentile of nanosecond samples, in milliseconds."""
    if not values:
        return None
    ordered = sorted(values)
    rank = min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank] / 1e6


@dataclass
class _Wire:
    """A target as bytes on the wire, and what its replies are checked for: computed once per
    phase, shared by every worker."""

    origin: Origin
    request: bytes  # head and body: one buffer to write is cheaper than two
    timeout: float
    first: re.Pattern[bytes] | None  # a stream's first content delta; None: a whole reply
    api: str  # the reply format (``Target.api``)


async def _one(wire: _Wire, pool: Pool, out: Samples) -> None:
    """One request, on a kept-alive connection of ``pool`` or a new one."""
    scan = StreamScan(wire.first, wire.api) if wire.first is not None else None
    sink = scan if scan is not None else Reply()
    t0 = time.perf_counter_ns()  # a reconnect counts in the request's time, as for any client
    try:
        async with asyncio.timeout(wire.timeout):
            resp = await pool.request(wire.origin, wire.request, b"", sink.feed)
            try:
                await resp.readany()  # the body goes to ``sink``: this waits for its end
            finally:
                resp.release()  # pooled when read to its end, else aborted
    except (TimeoutError, OSError, UpstreamError) as exc:
        _fail(out, type(exc).__name__, str(exc).encode())
        return
    end = sink.ended
    if resp.status >= 300:
        _fail(out, f"http {resp.status}", sink.sample())
    elif scan is None:
        out.latency.append(end - t0)
    elif scan.error:
        _fail(out, "event: error", scan.error)
    elif not scan.saw_end:
        _fail(out, "stream ended without its end marker", scan.tail)
    else:
        out.events += scan.events
        out.latency.append(end - t0)
        out.ttft.append((scan.first or end) - t0)


def _fail(out: Samples, kind: str, detail: bytes) -> None:
    out.errors[kind] += 1
    if not out.error_sample:
        out.error_sample = detail[:300].decode(errors="replace")


class _Pace:
    """One schedule for every worker of a phase: request starts ``1/rate`` s apart. A worker
    takes the next slot and sleeps until it; a slot already past is taken at once (the load
    then falls behind, as an open-loop client's would, but never bursts to catch up)."""

    def __init__(self, rate: float) -> None:
        self.gap = 1.0 / rate
        self.next = time.monotonic()

    async def wait(self) -> None:
        now = time.monotonic()
        slot = max(self.next, now)
        self.next = slot + self.gap
        if slot > now:
            await asyncio.sleep(slot - now)


async def _worker(
    wire: _Wire,
    pool: Pool,
    out: Samples,
    deadline: float,
    budget: list[int],
    pace: _Pace | None = None,
) -> None:
    while time.monotonic() < deadline and budget[0] != 0:
        if pace is not None:
            await pace.wait()
            if time.monotonic() >= deadline:
                break
        budget[0] -= 1
        await _one(wire, pool, out)


async def run_phase(
    target: Target,
    concurrency: int,
    duration: float,
    warmup: float = 1.0,
    requests: int = -1,
    timeout: float = 120.0,
    on_start: Callable[[], Any] | None = None,
    rate: float | None = None,
) -> dict[str, Any]:
    """Warm up (samples discarded, errors kept), then run for ``duration`` seconds or
    ``requests`` requests, whichever ends first: closed-loop, or paced at ``rate`` request
    starts a second (``_Pace``). ``on_start`` is called when the measured part begins. Returns
    the phase's summary. Each worker keeps its connection from the warm-up into
    the measured part: connecting is not what a phase measures."""
    origin, head = post_head(target.url, target.headers, len(target.body))
    stream_first = FIRST[target.api] if target.stream else None
    wire = _Wire(origin, head + target.body, timeout, stream_first, target.api)
    # Each worker holds at most one connection; one it closed may keep its slot until the close
    # completes, so twice the workers means none waits for a slot.
    pool = Pool(connect_timeout=timeout, keepalive=KEEPALIVE_SECONDS, limit=2 * concurrency)
    workers = range(concurrency)
    try:
        warm = Samples()
        if warmup > 0:
            end = time.monotonic() + warmup
            pace = _Pace(rate) if rate else None
            await asyncio.gather(*(_worker(wire, pool, warm, end, [-1], pace) for _ in workers))
        out = Samples()
        if on_start is not None:
            on_start()
        budget = [requests]
        started = time.monotonic()
        deadline = started + duration
        pace = _Pace(rate) if rate else None
        await asyncio.gather(*(_worker(wire, pool, out, deadline, budget, pace) for _ in workers))
        elapsed = time.monotonic() - started
    finally:
        pool.close()
    return summarise(out, warm, concurrency, elapsed, target.stream)


def summarise(
    out: Samples, warm: Samples, concurrency: int, elapsed: float, stream: bool
) -> dict[str, Any]:
    done = len(out.latency)
    errors = sum(out.errors.values())
    result: dict[str, Any] = {
        "concurrency": concurrency,
        "stream": stream,
        "seconds": round(elapsed, 3),
        "ok": done,
        "errors": errors,
        "warmup_errors": sum(warm.errors.values()),
        "error_kinds": dict(out.errors + warm.errors),
        "error_sample": out.error_sample or warm.error_sample,
        "per_s": round(done / elapsed, 1) if elapsed else 0.0,
        "p50_ms": percentile(out.latency, 50),
        "p90_ms": percentile(out.latency, 90),
        "p99_ms": percentile(out.latency, 99),
    }
    if stream:
        result.update(
            ttft_p50_ms=percentile(out.ttft, 50),
            ttft_p99_ms=percentile(out.ttft, 99),
            events=out.events,
            events_per_s=round(out.events / elapsed, 1) if elapsed else 0.0,
        )
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--url", required=True, help="e.g. http://127.0.0.1:8080/v1/messages")
    p.add_argument("--key", default="bench", help="API key")
    p.add_argument("--api", choices=("anthropic", "openai"), default="anthropic")
    p.add_argument("--stream", action="store_true")
    p.add_argument("-c", "--concurrency", type=int, default=1)
    p.add_argument("-d", "--duration", type=float, default=10.0, help="seconds (after warm-up)")
    p.add_argument("--warmup", type=float, default=1.0, help="seconds")
    p.add_argument("--requests", type=int, default=-1, help="stop after N requests")
    p.add_argument("--tokens", type=int, default=20, help="reply length ([sim:tokens=N])")
    p.add_argument("--model", default="claude-sonnet-5-5")
    args = p.parse_args()
    raise_nofile()
    body = request_body(args.api, args.stream, args.tokens, args.model)
    target = Target(args.url, headers_for(args.api, args.key), body, args.stream, args.api)
    phase = run_phase(target, args.concurrency, args.duration, args.warmup, args.requests)
    print(json.dumps(run_on_uvloop(phase), indent=2))


def run_on_uvloop(coro: Any) -> Any:
    """``asyncio.run`` on uvloop when it is installed (it is a dependency of the services)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


if __name__ == "__main__":
    main()
