"""The request log (docs/observability.md, "Request log"): one structured line per client request,
and its entry in PostgreSQL's bounded ``request_log`` table, which ``GET /admin/v1/requests``
reads from any edge.

``add`` is all a request pays: one list append once it is answered (its ``Entry`` was filled in
on the way: core/request_log.py). A task writes what gathered every ``FLUSH_INTERVAL``: the log
lines (one record carrying them all, which the logging configuration routes and
ezat_common.logs writes as one line each); and at most every ``STORE_INTERVAL`` the rows, in one
``COPY`` on a connection of its own. PostgreSQL away: the rows wait, at most ``MAX_PENDING`` of
them (the oldest are dropped beyond), the lines do not. Every ``PRUNE_INTERVAL`` an edge deletes
the entries older than ``[edge] request_log_days`` and those beyond the newest
``[edge] request_log_rows``.

Entries without a key (a missing or unknown key: anyone can send them, with request ids of their
choosing) are bounded apart, so that they cannot push real entries out: an edge stores at most
``ANONYMOUS_PER_SECOND`` of them a second (every one still has its log line), and pruning first
keeps only the newest ``ANONYMOUS_ROWS`` of them, before the row bound counts all.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable

import asyncpg
from aiohttp import web
from aiohttp.typedefs import Middleware
from ezat_common import db
from ezat_common.periodic import Periodic

from .core.request_log import (
    CLIENT_CLOSED,
    COLUMNS,
    AnonymousSampler,
    Entry,
    api_of,
    log_lines,
    row,
)

log = logging.getLogger("ezat.edge.requests")
health = logging.getLogger("ezat.edge")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
ENTRY = web.RequestKey("request_log_entry", Entry)
FLUSH_INTERVAL = 0.1
# Rows are stored at most this often: a COPY costs the edge ~0.5 ms whatever its size (bench/micro/
# test_request_log.py --copy), which a second's entries share where 0.1 s's would not.
STORE_INTERVAL = 1.0
PRUNE_INTERVAL = 60.0
WRITE_TIMEOUT = 5.0
MAX_PENDING = 50_000
ANONYMOUS_PER_SECOND = 20  # entries without a key an edge stores a second
ANONYMOUS_ROWS = 10_000  # entries without a key kept (at most request_log_rows)
_DB_ERRORS = (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError)


def begin(request: web.Request, rid: str) -> Entry | None:
    """The request's entry, kept on it; None for a request without one (health, admin)."""
    api = api_of(request.path)
    if api is None:
        return None
    entry = Entry(at=time.time(), started=time.monotonic(), request_id=rid, api=api)
    request[ENTRY] = entry
    return entry


def entry_of(request: web.Request) -> Entry | None:
    return request.get(ENTRY)


class RequestLog:
    def __init__(
        self,
        days: float,
        rows: int,
        anonymous_rows: int = ANONYMOUS_ROWS,
        anonymous_per_second: int = ANONYMOUS_PER_SECOND,
    ) -> None:
        self.days = days
        self.rows = rows
        self.anonymous_rows = min(anonymous_rows, rows)
        self._anonymous = AnonymousSampler(anonymous_per_second)
        self._pending: list[Entry] = []  # answered, not logged yet
        self._unstored: list[Entry] = []  # logged, not in PostgreSQL yet
        self._flusher = Periodic("request-log", FLUSH_INTERVAL, self.flush)
        self._conn: asyncpg.Connection | None = None
        self._stored = -math.inf  # monotonic, of the last batch stored
        self._pruned = 0.0
        self._failing = False

    def add(self, entry: Entry) -> None:
        self._pending.append(entry)

    def start(self) -> None:
        self._flusher.start()

    async def stop(self) -> None:
        await self._flusher.stop()
        try:
            await asyncio.wait_for(self.flush(store_now=True), WRITE_TIMEOUT)
        except TimeoutError:
            health.warning("request log: %d entries not stored at shutdown", len(self._unstored))
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                await conn.close(timeout=WRITE_TIMEOUT)
            except _DB_ERRORS:
                conn.terminate()

    async def flush(self, store_now: bool = False) -> None:
        entries, self._pending = self._pending, []
        now = time.time()
        for e in entries:
            e.resolve()
            if self._anonymous.keep(e.key_id, now):
                self._unstored.append(e)
        if entries and log.isEnabledFor(logging.INFO):
            # One record for the flush's lines, not one per entry (a LogRecord and its
            # formatting were most of an entry's cost): ezat_common.logs writes them as lines.
            log.info("request", extra={"json_lines": log_lines(entries)})
        if len(self._unstored) > MAX_PENDING:
            dropped = len(self._unstored) - MAX_PENDING
            del self._unstored[:dropped]
            health.warning("request log: %d entries not stored (database away)", dropped)
        if self._unstored and (store_now or time.monotonic() - self._stored >= STORE_INTERVAL):
            await self._store()
        if time.monotonic() - self._pruned > PRUNE_INTERVAL:
            await self._prune()

    async def _connection(self) -> asyncpg.Connection | None:
        """The log's own connection (not a pool's: a pool resets a connection it gets back, a
        round trip per batch), made again after an error."""
        if self._conn is None or self._conn.is_closed():
            try:
                self._conn = await asyncio.wait_for(db.connect(), WRITE_TIMEOUT)
            except _DB_ERRORS:
                return None
        return self._conn

    def _lost(self) -> None:
        if self._conn is not None:
            self._conn.terminate()  # whatever state it was left in: a new one next time
            self._conn = None

    async def _store(self) -> None:
        conn = await self._connection()
        if conn is None:
            return
        entries = self._unstored
        try:
            await conn.copy_records_to_table(
                "request_log",
                records=[row(e) for e in entries],
                columns=COLUMNS,
                timeout=WRITE_TIMEOUT,
            )
        except _DB_ERRORS as exc:
            self._lost()
            if not self._failing:  # once per outage, not once per flush
                health.warning("request log: entries not stored yet: %s", type(exc).__name__)
            self._failing = True
            return
        if self._failing:
            health.info("request log: entries stored again")
        self._failing = False
        self._stored = time.monotonic()
        del self._unstored[: len(entries)]

    async def _prune(self) -> None:
        conn = await self._connection()
        if conn is None:
            return
        self._pruned = time.monotonic()
        skipped = self._anonymous.take_skipped()
        if skipped:
            health.warning(
                "request log: %d entries without a key not stored (over %d a second)",
                skipped,
                self._anonymous.per_second,
            )
        try:
            await conn.execute(PRUNE_ANONYMOUS_SQL, self.anonymous_rows, timeout=WRITE_TIMEOUT)
            await conn.execute(PRUNE_SQL, self.days, self.rows, timeout=WRITE_TIMEOUT)
        except _DB_ERRORS as exc:
            self._lost()
            health.info("request log: not pruned: %s", type(exc).__name__)


# The entries without a key beyond their newest $1 (first: they never count against the
# entries with one); on the (key_id, at) index.
PRUNE_ANONYMOUS_SQL = """
DELETE FROM request_log
WHERE key_id = ''
  AND at <= (SELECT at FROM request_log WHERE key_id = '' ORDER BY at DESC OFFSET $1 LIMIT 1)
"""

# The entries older than $1 days, and those beyond the newest $2 (by id: the order they were
# stored in).
PRUNE_SQL = """
DELETE FROM request_log
WHERE at < now() - make_interval(secs => $1::float8 * 86400)
   OR id <= (SELECT id FROM request_log ORDER BY id DESC OFFSET $2 LIMIT 1)
"""


def request_log_mw(request_log: RequestLog) -> Middleware:
    """The outermost middleware: a request's entry (begun by errors_mw) ends with its answer, or
    with its client gone (``CLIENT_CLOSED``), and is handed to ``request_log``."""

    @web.middleware
    async def logged(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            resp = await handler(request)
        except asyncio.CancelledError:
            _end(request_log, request, CLIENT_CLOSED)
            raise
        except web.HTTPException as exc:  # a redirect, raised on by errors_mw
            _end(request_log, request, exc.status)
            raise
        _end(request_log, request, resp.status)
        return resp

    return logged


def _end(request_log: RequestLog, request: web.Request, status: int) -> None:
    entry = request.get(ENTRY)
    if entry is not None:
        entry.ended(status, time.monotonic())
        request_log.add(entry)
