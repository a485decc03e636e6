"""Structured JSON logging with the request id of the current task on every line.

Set the id with ``request_id.set(...)`` at the start of a request's task; every log call inside
that task (and tasks it spawns) carries it. Nothing secret is logged: keys never reach a logger.

Lines below WARNING are written in batches (``BatchingHandler``): the router logs every routing
decision, and one ``write`` per line was ~4% of its CPU under load. A batch leaves at the latest
``FLUSH_AFTER`` seconds after its first line; warnings and errors leave at once, with everything
before them, and so does everything at interpreter exit.

A record may carry a batch of lines instead of one (``json_lines``: what
``msgspec.json.Encoder.encode_lines`` made of objects with at least one field each): the request
log writes a flush's lines as one record, and the formatter gives each of them the record's
``ts``, ``level``, ``service`` and ``msg`` first, so that they read as one record per line would.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import sys
import time
from typing import IO

import msgspec

from . import environment

request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("request_id", default=None)

_encode = msgspec.json.Encoder().encode


class JsonFormatter(logging.Formatter):
    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        batch = getattr(record, "json_lines", None)
        if isinstance(batch, bytes):
            return self._lines(record, batch)
        entry: dict[str, object] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "service": self.service,
            "msg": record.getMessage(),
        }
        rid = getattr(record, "request_id", None) or request_id.get()
        if rid:
            entry["request_id"] = rid
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            entry.update(fields)
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return _encode(entry).decode()

    def _lines(self, record: logging.LogRecord, batch: bytes) -> str:
        """A batch's lines, each headed as ``format`` heads one record's (one encode, one
        replace: a line's own newlines are escaped in JSON, so a raw one only ends a line)."""
        head = (
            _encode(
                {
                    "ts": round(record.created, 3),
                    "level": record.levelname.lower(),
                    "service": self.service,
                    "msg": record.getMessage(),
                }
            )[:-1]
            + b","
        )
        body = batch.rstrip(b"\n")
        if not body:
            return ""
        return (head + body[1:].replace(b"\n{", b"\n" + head)).decode()


FLUSH_AFTER = 0.1  # seconds an info line may wait for company
FLUSH_LINES = 256  # or this many lines, whichever comes first


class BatchingHandler(logging.Handler):
    """Formats each record at once, writes them together: one ``write`` per batch of lines."""

    def __init__(self, stream: IO[str]) -> None:
        super().__init__()
        self.stream = stream
        self._lines: list[str] = []
        self._timer: asyncio.TimerHandle | None = None

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._lines.append(self.format(record))
        except Exception:
            self.handleError(record)
            return
        if record.levelno >= logging.WARNING or len(self._lines) >= FLUSH_LINES:
            self.flush()
        elif self._timer is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # no loop (start-up, tools): nothing would flush it later
                self.flush()
                return
            self._timer = loop.call_later(FLUSH_AFTER, self.flush)

    def flush(self) -> None:
        with self.lock or contextlib.nullcontext():  # a thread may log while the loop flushes
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            lines, self._lines = self._lines, []
        if not lines:
            return
        try:
            self.stream.write("\n".join(lines) + "\n")
            self.stream.flush()
        except (OSError, ValueError):  # stderr closed: nowhere left to report it
            pass


def setup(service: str) -> logging.Logger:
    # The JSON lines carry none of these, and gathering them is a quarter of a log call (the
    # caller's frame walk above all); the logging HOWTO's "Optimization" section lists them.
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    handler = BatchingHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(service))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(environment.log_level())
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    return logging.getLogger(f"ezat.{service}")


def now() -> float:
    return time.time()
