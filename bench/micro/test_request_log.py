"""µs the request log costs the edge per request (docs/performance.md, "Request log").

Run by ``make bench`` beside the translation core, or alone:

    .venv/bin/pytest bench/micro/test_request_log.py --benchmark-only
    .venv/bin/python bench/micro/test_request_log.py [--profile] [--copy]

The script prints the totals (the best of many short runs: the machine is shared), with
``--profile`` cProfile's top functions, with ``--copy`` the CPU the rows' ``COPY`` costs the
edge and PostgreSQL per entry (on a PostgreSQL of its own).

Request path: what a request pays, ``begin`` (errors_mw), the middleware layer of
``request_log_mw``, the fields auth, the handler and the relay set, to ``_end`` and ``add``, on a
mocked aiohttp request, less the same handler called without any of it. Flush
share: what the flush task pays per entry, a batch of ``BATCH`` entries written as log lines
(through a real ``logging`` configuration: ezat_common.logs' handler on a null stream) and made
into COPY rows; the COPY itself is asyncpg's and PostgreSQL's (not measured here).
"""

from __future__ import annotations

import asyncio
import cProfile
import logging
import os
import pstats
import sys
import tempfile
import time
from collections.abc import Awaitable, Coroutine
from pathlib import Path
from typing import Any

import asyncpg
from aiohttp import web
from aiohttp.test_utils import make_mocked_request
from aiohttp.typedefs import Middleware
from ezat_common import db, logs
from ezat_common.envelopes import Attribution, UsageRecord, encode
from ezat_common.prices import Prices
from ezat_edge import request_log
from ezat_edge.core.request_log import Entry, row

BATCH = 64
USAGE = encode(
    UsageRecord(
        request_id="req_0123456789abcdef",
        uid="u_0123456789abcdef01234567",
        key_id="key_0123456789abcdef",
        model="anthropic/claude-sonnet-5-5",
        api="messages",
        stream=False,
        status="complete",
        deployment="bench",
        region="us",
        deployment_kind="anthropic",
        input_tokens=14,
        output_tokens=20,
        received_at=1.0,
        upstream_started_at=1.1,
        first_token_at=1.2,
        finished_at=1.3,
        prices=Prices(
            input=3_000_000, output=15_000_000, cache_write_5m=0, cache_write_1h=0, cache_read=0
        ),
        attribution=Attribution(team_id="team_0123456789abcdef", client="anthropic-sdk"),
    )
)


def _quiet_logging() -> None:
    """The edge's logging configuration, written to nowhere."""
    logs.setup("edge")
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logs.BatchingHandler):
            handler.stream = open(os.devnull, "w")  # noqa: SIM115 (the process's own, to its end)
    logging.getLogger().setLevel(logging.INFO)


class _Log(request_log.RequestLog):
    """Flushes without PostgreSQL: rows are made as ``_store`` would, not sent."""

    def __init__(self) -> None:
        super().__init__(days=7, rows=100_000)
        self.made: list[Any] = []

    async def _store(self) -> None:
        self.made = [row(e) for e in self._unstored]
        self._unstored.clear()

    async def _prune(self) -> None:
        self._pruned = float("inf")


RESPONSE = web.Response(status=200)


async def answered(request: web.Request) -> web.StreamResponse:
    """A handler as the request log sees it: the fields auth.py, handlers.py and relay.py set."""
    entry = request_log.entry_of(request)  # auth.py
    assert entry is not None
    entry.key_id = "key_0123456789abcdef"
    entry.team_id = "team_0123456789abcdef"
    call_entry = request_log.entry_of(request)  # handlers.py, then relay.py
    assert call_entry is not None
    call_entry.model = "claude-sonnet-5-5"
    call_entry.usage = USAGE
    return RESPONSE


async def bare(request: web.Request) -> web.StreamResponse:
    """The same handler, without a request log: the baseline subtracted."""
    return RESPONSE


def drive(coroutine: Awaitable[web.StreamResponse]) -> web.StreamResponse:
    """A coroutine that never waits, run without an event loop (no loop's cost measured)."""
    assert isinstance(coroutine, Coroutine)
    try:
        coroutine.send(None)
    except StopIteration as done:
        response: web.StreamResponse = done.value
        return response
    raise AssertionError("the handler waited")


def one_request(logged: Middleware, request: web.Request) -> None:
    """What one answered model call costs with its entry, from errors_mw to request_log_mw."""
    request_log.begin(request, "req_0123456789abcdef")  # errors_mw
    drive(logged(request, answered))


def no_log(request: web.Request) -> None:
    drive(bare(request))


def flush_batch(
    log: _Log, logged: Middleware, loop: asyncio.AbstractEventLoop, request: web.Request
) -> None:
    for _ in range(BATCH):
        one_request(logged, request)
    loop.run_until_complete(log.flush())
    logging.getLogger().handlers[0].flush()


def test_request_log_request_path_per_request(benchmark):  # type: ignore[no-untyped-def]
    log = _Log()
    request = make_mocked_request("POST", "/v1/messages")
    benchmark(one_request, request_log.request_log_mw(log), request)
    assert log._pending


def test_request_log_flush_per_64_requests(benchmark):  # type: ignore[no-untyped-def]
    _quiet_logging()
    log = _Log()
    loop = asyncio.new_event_loop()
    try:
        request = make_mocked_request("POST", "/v1/messages")
        benchmark(flush_batch, log, request_log.request_log_mw(log), loop, request)
    finally:
        loop.close()
    assert len(log.made) == BATCH


def _best(run: Any, count: int, repeats: int = 60) -> float:
    """µs per item of ``run(count)``, the best of ``repeats`` (the least disturbed by others)."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        run(count)
        best = min(best, (time.perf_counter() - t0) / count)
    return best * 1e6


def main() -> None:
    _quiet_logging()
    log = _Log()
    logged = request_log.request_log_mw(log)
    loop = asyncio.new_event_loop()
    request = make_mocked_request("POST", "/v1/messages")

    def path(n: int) -> None:
        for _ in range(n):
            one_request(logged, request)
        log._pending.clear()

    def baseline(n: int) -> None:
        for _ in range(n):
            no_log(request)

    def whole(n: int) -> None:
        for _ in range(n // BATCH):
            flush_batch(log, logged, loop, request)

    count = 8 * BATCH
    base = _best(baseline, count)
    on_path, total = _best(path, count) - base, _best(whole, count) - base
    print(f"request path {on_path:.2f} µs/request, flush share {total - on_path:.2f} µs, "
          f"request log in all {total:.2f} µs/request")  # fmt: skip
    if "--profile" in sys.argv:
        prof = cProfile.Profile()
        prof.runcall(whole, 200 * BATCH)
        pstats.Stats(prof).sort_stats("tottime").print_stats(18)
    loop.close()
    if "--copy" in sys.argv:
        copy_cost()


def copy_cost(flushes: int = 300) -> None:
    """CPU per entry of the rows' ``COPY`` (``RequestLog._store``), on a PostgreSQL of its own:
    the edge's (asyncpg's encoding, the socket) and PostgreSQL's (its backends)."""
    from ezat_cli.infra import PostgresServer
    from procstat import ProcGroup

    with tempfile.TemporaryDirectory() as tmp:
        pg = PostgresServer(Path(tmp))
        pg.start()
        try:
            assert pg.pid is not None
            os.environ["DATABASE_URL"] = pg.url
            backends = ProcGroup({"pg": [pg.pid]}, with_descendants={"pg"})
            for size in (BATCH, 8 * BATCH):
                edge, server = asyncio.run(_copies(backends, flushes * BATCH // size, size))
                print(f"COPY of {size} rows, per entry: edge {edge:.2f} µs CPU, "
                      f"PostgreSQL {server:.2f} µs CPU")  # fmt: skip
        finally:
            pg.stop()


async def _copies(backends: Any, flushes: int, size: int) -> tuple[float, float]:
    conn = await asyncpg.connect(os.environ["DATABASE_URL"])
    try:
        await db.migrate(conn)
    finally:
        await conn.close()
    log = request_log.RequestLog(days=7, rows=10_000_000)
    log.add(_resolved())
    await log.flush()  # the pool, the first prune
    batches = [[_resolved() for _ in range(size)] for _ in range(flushes)]
    before, cpu = backends.snapshot()["pg"][0], time.process_time()
    for batch in batches:
        log._unstored = batch
        await log._store()
    edge = time.process_time() - cpu
    server = backends.snapshot()["pg"][0] - before
    await log.stop()
    per = 1e6 / (flushes * size)
    return edge * per, server * per


def _resolved() -> Entry:
    e = Entry(at=time.time(), started=0.0, request_id="req_0123456789abcdef", api="messages")
    e.key_id, e.usage = "key_0123456789abcdef", USAGE
    e.ended(200, 0.5)
    e.resolve()
    return e


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # bench/procstat.py
    main()
