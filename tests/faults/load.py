"""Load with a recorded history for the fault suite (docs/reliability.md).

``run_load`` starts N requests at once through the official SDKs, mixing both APIs, streaming
and not; ``run_waves`` keeps N in flight for as long as a fault lasts (each client starts its next
request when its last one ended). Each request's history says when it started and ended, what the
client saw (a complete answer, an error event inside a stream, an HTTP error and its
``retry-after``, or nothing before the bound: hung) and its usage rows. ``check`` asserts the
invariants every scenario shares.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import aiohttp
import anthropic
import asyncpg
import openai
from ezat_cli.infra import free_port, stop_process, wait_port
from ezat_cli.stack import Stack
from prometheus_client.parser import text_string_to_metric_families
from support.clients import register, track

Kind = Literal["anthropic-stream", "anthropic-json", "openai-stream", "openai-json"]
KINDS: tuple[Kind, ...] = ("anthropic-stream", "anthropic-json", "openai-stream", "openai-json")
Outcome = Literal["complete", "stream_error", "http_error", "hung"]
HUNG_AFTER = 30.0  # seconds: a request still open then is hung


@dataclass
class Gateway:
    """The stack under test and one client of each SDK (made once: building a client costs tens
    of milliseconds of CPU, which would delay the load past the moment of the fault)."""

    stack: Stack
    url: str
    key: str
    database_url: str
    # Each replica's /metrics, by process name.
    metrics: dict[str, str] = field(default_factory=dict)
    # Counter values before a scenario, by process name (kill_busier).
    baseline: dict[str, float] = field(default_factory=dict)
    _clients: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        register(self)  # its clients are closed after every test (support/clients.py)

    async def aclose(self) -> None:
        """Close the SDK clients made so far (the next call makes new ones)."""
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.close()

    async def sample(self, name: str, metric: str) -> float:
        """The sum of ``metric``'s samples on process ``name`` (0 when it does not answer)."""
        try:
            async with (
                aiohttp.ClientSession() as http,
                http.get(self.metrics[name], timeout=aiohttp.ClientTimeout(total=2)) as resp,
            ):
                text = await resp.text()
        except (aiohttp.ClientError, TimeoutError):
            return 0.0
        total = 0.0
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if s.name == metric and s.labels.get("api", "chat") == "chat":
                    total += s.value
        return total

    def anthropic(self) -> anthropic.AsyncAnthropic:
        if "anthropic" not in self._clients:
            # Tracked as well: a Gateway made inside a test is gone before the test's end, and
            # its clients must still be closed then, not left to the garbage collector.
            self._clients["anthropic"] = track(
                anthropic.AsyncAnthropic(base_url=self.url, api_key=self.key, max_retries=0)
            )
        client: anthropic.AsyncAnthropic = self._clients["anthropic"]
        return client

    def openai(self) -> openai.AsyncOpenAI:
        if "openai" not in self._clients:
            self._clients["openai"] = track(
                openai.AsyncOpenAI(
                    base_url=self.url + "/openai/v1", api_key=self.key, max_retries=0
                )
            )
        client: openai.AsyncOpenAI = self._clients["openai"]
        return client


@dataclass
class History:
    kind: Kind
    request_id: str
    started: float
    ended: float = 0.0
    outcome: Outcome = "hung"
    status: int = 0
    started_streaming: bool = False  # some answer text reached the client
    chars: int = 0  # answer text the client received (a lost chunk shows as fewer)
    error: str = ""
    retry_after: str | None = None  # the header of an HTTP error
    rows: list[dict[str, Any]] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return self.ended - self.started


def _prompt(tokens: int, token_ms: int | None) -> str:
    pace = f" token_ms={token_ms}" if token_ms is not None else ""
    return f"Tell me a long story. [sim:tokens={tokens}{pace}]"


async def _anthropic(
    t: Gateway, h: History, stream: bool, tokens: int, token_ms: int | None
) -> None:
    client = t.anthropic()
    args: dict[str, Any] = {
        "model": "claude-sonnet-5-5",
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": _prompt(tokens, token_ms)}],
        "extra_headers": {"x-request-id": h.request_id},
    }
    if not stream:
        msg = await client.messages.create(**args)
        h.chars = sum(len(b.text) for b in msg.content if b.type == "text")
        h.outcome = "complete"
        return
    async with client.messages.stream(**args) as s:
        async for event in s:
            if event.type == "text":
                h.started_streaming = True
                h.chars += len(event.text)
            if event.type == "message_stop":
                h.outcome = "complete"


async def _openai(t: Gateway, h: History, stream: bool, tokens: int, token_ms: int | None) -> None:
    client = t.openai()
    args: dict[str, Any] = {
        "model": "claude-sonnet-5-5",
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": _prompt(tokens, token_ms)}],
        "extra_headers": {"x-request-id": h.request_id},
    }
    await chat(client, h, stream, args)


async def chat(client: openai.AsyncOpenAI, h: History, stream: bool, args: dict[str, Any]) -> None:
    """A Chat Completions request of ``args`` and what its client saw, into ``h``."""
    if not stream:
        completion = await client.chat.completions.create(**args)
        h.chars = len(completion.choices[0].message.content or "")
        h.outcome = "complete"
        return
    chunks = await client.chat.completions.create(
        **args, stream=True, stream_options={"include_usage": True}
    )
    async for chunk in chunks:
        if chunk.choices and chunk.choices[0].delta.content:
            h.started_streaming = True
            h.chars += len(chunk.choices[0].delta.content)
        if chunk.usage is not None:
            h.outcome = "complete"  # the last chunk before [DONE]


# One request's client side: (gateway, its history, stream or not, tokens, token_ms); it sets
# the history's outcome to "complete" once the client saw the whole answer.
Call = Callable[[Gateway, History, bool, int, int | None], Awaitable[None]]


async def one(
    t: Gateway, kind: Kind, tokens: int, token_ms: int | None = None, call: Call | None = None
) -> History:
    """One request of ``kind`` (``call`` makes it, when not the plain one of its API) and what
    its client saw."""
    h = History(kind, f"flt-{uuid.uuid4().hex[:16]}", time.monotonic())
    if call is None:
        call = _anthropic if kind.startswith("anthropic") else _openai
    try:
        await asyncio.wait_for(call(t, h, kind.endswith("stream"), tokens, token_ms), HUNG_AFTER)
    except TimeoutError:
        h.outcome = "hung"
    except (anthropic.APIStatusError, openai.APIStatusError) as exc:
        h.status = exc.status_code
        h.error = str(exc)[:300]
        h.retry_after = exc.response.headers.get("retry-after")
        in_stream = kind.endswith("stream") and exc.response.status_code == 200
        h.outcome = "stream_error" if in_stream else "http_error"
    except Exception as exc:
        # An error event inside a 200 stream (the SDKs raise APIError for it), or a connection
        # that broke (mid-stream the SDKs let their HTTP client's own error through).
        h.error = f"{type(exc).__name__}: {str(exc)[:300]}"
        h.outcome = "stream_error" if kind.endswith("stream") else "http_error"
    h.ended = time.monotonic()
    if h.outcome not in ("complete", "stream_error", "http_error", "hung"):
        h.outcome = "stream_error"
    return h


async def run_load(
    t: Gateway,
    n: int,
    tokens: int,
    fault: Callable[[], Awaitable[None]] | None = None,
    fault_at: float = 1.0,
    settle: float = 3.0,
    token_ms: int | None = None,
) -> list[History]:
    """``n`` requests at once (the kinds in turn), ``fault`` run ``fault_at`` s in; ``token_ms``
    paces the simulator when its config does not."""
    kinds = itertools.cycle(KINDS)
    tasks = [asyncio.create_task(one(t, next(kinds), tokens, token_ms)) for _ in range(n)]
    if fault is not None:
        await asyncio.sleep(fault_at)
        await fault()
    histories = list(await asyncio.gather(*tasks))
    await attach_rows(t, histories, settle)
    return histories


async def run_waves(
    t: Gateway,
    n: int,
    tokens: int,
    fault: Callable[[], Awaitable[None]],
    fault_at: float,
    after: float,
    token_ms: int | None = None,
    ramp: float = 0.0,
) -> list[History]:
    """``n`` requests in flight from the start until ``after`` s after ``fault`` returned: each of
    ``n`` clients starts its next request (the kinds in turn) as soon as its last one ended, the
    first ones spread over ``ramp`` s; ``fault`` starts ``fault_at`` s in. Every request's history,
    without rows (``attach_rows``, once billing caught up)."""
    histories: list[History] = []
    kinds = itertools.cycle(KINDS)
    stop = asyncio.Event()

    async def client(delay: float) -> None:
        await asyncio.sleep(delay)
        while not stop.is_set():
            histories.append(await one(t, next(kinds), tokens, token_ms))

    clients = [asyncio.create_task(client(ramp * i / n)) for i in range(n)]
    try:
        await asyncio.sleep(fault_at)
        await fault()
        await asyncio.sleep(after)
    finally:
        stop.set()
        await asyncio.gather(*clients)
    return histories


async def attach_rows(t: Gateway, histories: list[History], settle: float = 0.0) -> None:
    """Each request's usage rows (as stored now, after ``settle`` s)."""
    await asyncio.sleep(settle)
    conn = await asyncpg.connect(t.database_url)
    try:
        rows = await conn.fetch(
            "SELECT request_id, status, output_tokens, cost_micros, error_type, awaiting_delivery"
            " FROM usage_records WHERE request_id = ANY($1::text[])",
            [h.request_id for h in histories],
        )
    finally:
        await conn.close()
    by_id = {h.request_id: h for h in histories}
    for h in histories:
        h.rows = []
    for row in rows:
        by_id[row["request_id"]].rows.append(dict(row))


async def wait_billed(t: Gateway, histories: list[History], within: float) -> float:
    """Seconds until every answer a client saw complete has its usage row (billing caught up
    with the outbox); fails past ``within``."""
    start = time.monotonic()
    while True:
        await attach_rows(t, histories)
        missing = [h.request_id for h in histories if h.outcome == "complete" and not h.rows]
        if not missing:
            return time.monotonic() - start
        assert time.monotonic() - start < within, f"{len(missing)} complete answers unbilled"
        await asyncio.sleep(0.5)


def summary(histories: list[History]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for h in histories:
        counts[h.outcome] = counts.get(h.outcome, 0) + 1
    return counts


def ranges(histories: list[History], since: float | None = None) -> dict[str, str]:
    """For the measured tables: per kind and outcome, how many and their seconds (min-max), from
    their start or, given ``since`` (a ``time.monotonic()``, e.g. of the fault), from then."""
    groups: dict[str, list[float]] = {}
    for h in histories:
        seconds = h.seconds if since is None else h.ended - since
        groups.setdefault(f"{h.kind} {h.outcome}", []).append(seconds)
    return {k: f"{len(v)} in {min(v):.1f}-{max(v):.1f}s" for k, v in sorted(groups.items())}


def check(histories: list[History], bound: float) -> None:
    """The invariants of every scenario: nothing hangs, every request ends within ``bound`` s,
    every answer the client saw complete is charged exactly once, no request is charged twice."""
    first = min((h.started for h in histories), default=0.0)
    hung = [
        (h.request_id, h.kind, f"at {h.started - first:.1f}s", f"streaming {h.started_streaming}",
         f"chars {h.chars}", [(r["status"], r["output_tokens"]) for r in h.rows])
        for h in histories if h.outcome == "hung"
    ]  # fmt: skip
    assert not hung, f"hung (id, kind, start, some text, text chars, usage rows): {hung}"
    slow = [(h.kind, round(h.seconds, 1), h.outcome) for h in histories if h.seconds > bound]
    assert not slow, f"ended after {bound}s: {slow}"
    unbilled = [(h.kind, h.request_id) for h in histories if h.outcome == "complete" and not h.rows]
    assert not unbilled, f"complete without a usage row: {unbilled}"
    # A request published twice (its first holder died) may leave a failed row of its first
    # publish beside the row of its answer: never two charged rows.
    doubled = [(h.kind, h.request_id) for h in histories if len(charged(h)) > 1]
    assert not doubled, f"usage charged twice: {doubled}"
    wrong = [
        (h.kind, [r["status"] for r in h.rows]) for h in histories
        if h.outcome == "complete" and [r["status"] for r in charged(h)] != ["complete"]
    ]  # fmt: skip
    assert not wrong, f"complete answers not charged once as complete: {wrong}"


def charged(h: History) -> list[dict[str, Any]]:
    """The request's rows that charge (or may still charge) anything."""
    return [r for r in h.rows if r["status"] != "failed" or r["cost_micros"] > 0]


async def serves_again(t: Gateway, within: float = 20.0) -> History:
    """The stack serves again by itself: a request of each API succeeds within ``within`` s."""
    deadline = time.monotonic() + within
    while True:
        results = [await one(t, kind, 4) for kind in ("anthropic-json", "openai-stream")]
        if all(r.outcome == "complete" for r in results):
            return results[-1]
        assert time.monotonic() < deadline, f"not serving again: {results}"
        await asyncio.sleep(0.5)


@contextlib.contextmanager
def another_edge(t: Gateway, name: str, **edge: int | float | str) -> Iterator[Gateway]:
    """One more edge on ``t``'s stack, with ``[edge]`` settings of its own (TOML values: a string
    in its quotes), in a config file beside the stack's, which it otherwise copies; the Gateway it
    yields calls it, and its ``metrics`` has its /metrics under ``name``. Stopped, and no longer
    supervised, afterwards."""
    port = free_port()
    settings = "".join(f"{key} = {value}\n" for key, value in edge.items())
    text = re.sub(
        r'\[edge\]\nlisten = "[^"]*"\n',
        f'[edge]\nlisten = "127.0.0.1:{port}"\n{settings}',
        t.stack.config_path.read_text(),
        count=1,
    )
    config = t.stack.config_path.with_name(f"{name}.toml")
    config.write_text(text)
    with t.stack._lock:  # the supervisor's thread walks the children
        child = t.stack.add_service(name, "edge", {"EZAT_CONFIG": str(config.resolve())})
    try:
        wait_port(port, child.proc, timeout=30)
        url = f"http://127.0.0.1:{port}"
        yield Gateway(t.stack, url, t.key, t.database_url, {name: f"{url}/metrics"})
    finally:
        with t.stack._lock:
            child.supervised = False
            del t.stack.children[name]
        if child.proc is not None:
            stop_process(child.proc)


def rss_kib(pid: int) -> int:
    """The resident memory of process ``pid`` (VmRSS), in KiB."""
    status = Path(f"/proc/{pid}/status").read_text()
    match = re.search(r"^VmRSS:\s+(\d+) kB$", status, re.MULTILINE)
    assert match is not None, status
    return int(match[1])
