"""A lean closed-loop HTTP load generator for the EZAT benchmark (asyncio + aiohttp on uvloop).

Each of ``concurrency`` workers sends the same pre-encoded body again and again over a pooled
keep-alive connector until the phase's deadline (or its request budget) is spent. Replies are not
parsed: a non-streaming reply is read whole; a stream is scanned as bytes, counting SSE events
(blank-line terminators), noting the time of the first content delta and of the end. Any non-2xx
status, exception, ``event: error`` or stream without its end marker counts as an error.

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

import aiohttp

# The first content delta of each API's stream, and the marker of a complete stream.
_FIRST_ANTHROPIC = re.compile(rb"event: content_block_delta")
_FIRST_OPENAI = re.compile(rb'"content":\s?"[^"]')
_END = {"anthropic": b"message_stop", "openai": b"[DONE]"}
_ERROR_EVENT = b"event: error"


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
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": 256,
        "messages": [{"role": "user", "content": text}],
    }
    if stream:
        body["stream"] = True
    return json.dumps(body, separators=(",", ":")).encode()


def headers_for(api: str, key: str) -> dict[str, str]:
    if api == "openai":
        return {"authorization": f"Bearer {key}", "content-type": "application/json"}
    return {"x-api-key": key, "anthropic-version": "2023-06-01", "content-type": "application/json"}


@dataclass(frozen=True)
class Target:
    """Where to send, what, and how to recognise a stream's first delta and its end."""

    url: str
    headers: dict[str, str]
    body: bytes
    stream: bool
    api: str = "anthropic"  # the reply format: which stream markers to look for


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


async def _one(session: aiohttp.ClientSession, target: Target, out: Samples) -> None:
    t0 = time.perf_counter_ns()
    try:
        async with session.post(target.url, data=target.body, headers=target.headers) as resp:
            if not target.stream:
                data = await resp.read()
                if resp.status >= 300:
                    _fail(out, f"http {resp.status}", data)
                    return
                out.latency.append(time.perf_counter_ns() - t0)
                return
            if resp.status >= 300:
                _fail(out, f"http {resp.status}", await resp.read())
                return
            first = 0
            events = 0
            tail = b""
            marker = _FIRST_OPENAI if target.api == "openai" else _FIRST_ANTHROPIC
            async for chunk in resp.content.iter_any():
                joined = tail + chunk
                # Terminators inside this chunk, plus one straddling the previous chunk.
                events += chunk.count(b"\n\n") + (tail[-1:] == b"\n" and chunk[:1] == b"\n")
                if not first and marker.search(joined):
                    first = time.perf_counter_ns()
                if _ERROR_EVENT in joined:
                    _fail(out, "event: error", joined)
                    return
                tail = joined[-32:]
            end = time.perf_counter_ns()
            if _END[target.api] not in tail:
                _fail(out, "stream ended without its end marker", tail)
                return
            out.events += events
            out.latency.append(end - t0)
            out.ttft.append((first or end) - t0)
    except (TimeoutError, aiohttp.ClientError, OSError) as exc:
        _fail(out, type(exc).__name__, str(exc).encode())


def _fail(out: Samples, kind: str, detail: bytes) -> None:
    out.errors[kind] += 1
    if not out.error_sample:
        out.error_sample = detail[:300].decode(errors="replace")


async def _worker(
    session: aiohttp.ClientSession, target: Target, out: Samples, deadline: float, budget: list[int]
) -> None:
    while time.monotonic() < deadline and budget[0] != 0:
        budget[0] -= 1
        await _one(session, target, out)


def _session(concurrency: int, timeout: float) -> aiohttp.ClientSession:
    connector = aiohttp.TCPConnector(
        limit=concurrency, limit_per_host=0, ttl_dns_cache=None, enable_cleanup_closed=False
    )
    return aiohttp.ClientSession(
        connector=connector,
        timeout=aiohttp.ClientTimeout(total=timeout),
        skip_auto_headers=("User-Agent", "Accept-Encoding"),
        auto_decompress=False,
    )


async def run_phase(
    target: Target,
    concurrency: int,
    duration: float,
    warmup: float = 1.0,
    requests: int = -1,
    timeout: float = 120.0,
    on_start: Callable[[], Any] | None = None,
) -> dict[str, Any]:
    """Warm up (samples discarded, errors kept), then run closed-loop for ``duration`` seconds
    or ``requests`` requests, whichever ends first. ``on_start`` is called when the measured part
    begins. Returns the phase's summary."""
    async with _session(concurrency, timeout) as session:
        warm = Samples()
        if warmup > 0:
            end = time.monotonic() + warmup
            await asyncio.gather(
                *(_worker(session, target, warm, end, [-1]) for _ in range(concurrency))
            )
        out = Samples()
        if on_start is not None:
            on_start()
        budget = [requests]
        started = time.monotonic()
        deadline = started + duration
        await asyncio.gather(
            *(_worker(session, target, out, deadline, budget) for _ in range(concurrency))
        )
        elapsed = time.monotonic() - started
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
    print(json.dumps(run(phase), indent=2))


def run(coro: Any) -> Any:
    """``asyncio.run`` on uvloop when it is installed (it is a dependency of the services)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


if __name__ == "__main__":
    main()
