"""Structured JSON logging with the request id of the current task on every line.

Set the id with ``request_id.set(...)`` at the start of a request's task; every log call inside
that task (and tasks it spawns) carries it. Nothing secret is logged: keys never reach a logger.
"""

from __future__ import annotations

import contextvars
import logging
import os
import sys
import time

import msgspec

request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("request_id", default=None)

_encode = msgspec.json.Encoder().encode


class JsonFormatter(logging.Formatter):
    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
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


def setup(service: str) -> logging.Logger:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(service))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(os.environ.get("EZAT_LOG_LEVEL", "INFO").upper())
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    return logging.getLogger(f"ezat.{service}")


def now() -> float:
    return time.time()
