"""A lean closed-loop HTTP load generator for the EZAT benchmark (asyncio on uvloop, ``http1.py``).

Each of ``concurrency`` workers sends the same pre-encoded request again and again over its own
keep-alive connection until the phase's deadline (or its request budget) is spent. Replies are
HTTP-decoded but not JSON-parsed: a non-streaming reply is read whole; a stream's body is scanned
as bytes as it arrives, counting SSE events
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

import http1

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


class _StreamScan:
    """What a stream's body shows as it is read: SSE events (blank-line terminators), the time of
    the first content delta, an error event, and its last bytes (where the end marker is)."""

    __slots__ = ("error", "events", "first", "marker", "tail")

    def __init__(self, marker: re.Pattern[bytes]) -> None:
        self.marker = marker
        self.first = 0
        self.events = 0
        self.tail = b""
        self.error = b""

    def feed(self, piece: bytes) -> None:
        tail = self.tail
        joined = tail + piece
        # Terminators inside this piece, plus one straddling the previous piece.
        self.events += piece.count(b"\n\n") + (tail[-1:] == b"\n" and piece[:1] == b"\n")
        if not self.first and self.marker.search(joined):
            self.first = time.perf_counter_ns()
        if not self.error and _ERROR_EVENT in joined:
            self.error = joined
        self.tail = joined[-32:]


@dataclass
class _Wire:
    """A target as bytes on the wire, and what its replies are checked for: computed once per
    phase, shared by every worker."""

    host: str
    port: int
    request: bytes
    timeout: float
    first: re.Pattern[bytes] | None  # a stream's first content delta; None: a whole reply
    end: bytes  # a complete stream's end marker


async def _one(wire: _Wire, slot: list[http1.Connection | None], out: Samples) -> None:
    """One request on the worker's connection (``slot``), reconnecting when it is gone."""
    conn = slot[0]
    scan = _StreamScan(wire.first) if wire.first is not None else None
    t0 = time.perf_counter_ns()  # a reconnect counts in the request's time, as for any client
    try:
        async with asyncio.timeout(wire.timeout):
            if conn is None or not conn.usable:
                conn = slot[0] = await http1.connect(wire.host, wire.port)
            resp = conn.send(wire.request, scan.feed if scan is not None else None)
            status = await resp.done
    except (TimeoutError, OSError, http1.ProtocolError, http1.ServerDisconnected) as exc:
        if conn is not None:
            conn.close()
        _fail(out, type(exc).__name__, str(exc).encode())
        return
    end = resp.ended
    if status >= 300:
        _fail(out, f"http {status}", bytes(resp.body))
    elif scan is None:
        out.latency.append(end - t0)
    elif scan.error:
        _fail(out, "event: error", scan.error)
    elif wire.end not in scan.tail:
        _fail(out, "stream ended without its end marker", scan.tail)
    else:
        out.events += scan.events
        out.latency.append(end - t0)
        out.ttft.append((scan.first or end) - t0)


def _fail(out: Samples, kind: str, detail: bytes) -> None:
    out.errors[kind] += 1
    if not out.error_sample:
        out.error_sample = detail[:300].decode(errors="replace")


async def _worker(
    wire: _Wire,
    slot: list[http1.Connection | None],
    out: Samples,
    deadline: float,
    budget: list[int],
) -> None:
    while time.monotonic() < deadline and budget[0] != 0:
        budget[0] -= 1
        await _one(wire, slot, out)


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
    begins. Returns the phase's summary. Each worker keeps its connection from the warm-up into
    the measured part: connecting is not what a phase measures."""
    host, port, request = http1.encode_request(target.url, target.headers, target.body)
    first = _FIRST_OPENAI if target.api == "openai" else _FIRST_ANTHROPIC
    wire = _Wire(host, port, request, timeout, first if target.stream else None, _END[target.api])
    slots: list[list[http1.Connection | None]] = [[None] for _ in range(concurrency)]
    try:
        warm = Samples()
        if warmup > 0:
            end = time.monotonic() + warmup
            await asyncio.gather(*(_worker(wire, slot, warm, end, [-1]) for slot in slots))
        out = Samples()
        if on_start is not None:
            on_start()
        budget = [requests]
        started = time.monotonic()
        deadline = started + duration
        await asyncio.gather(*(_worker(wire, slot, out, deadline, budget) for slot in slots))
        elapsed = time.monotonic() - started
    finally:
        for slot in slots:
            if slot[0] is not None:
                slot[0].close()
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
