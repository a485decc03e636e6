"""NATS handler: FetchRequest in, FetchResult out; each request in its own task.

Thin: decode -> ``Fetcher.fetch`` -> pack the bytes (inline, or a claim check above the message
limit) -> respond. Downloads are slow, so the subscription callback only starts a task; a
semaphore bounds how many run (and how much memory they hold) at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any
from urllib.parse import urlsplit

import msgspec
from ezat_common import bus, envelopes, lifecycle, logs
from ezat_common.subjects import QUEUE_FETCHER, Subjects
from nats.aio.client import Client
from nats.aio.msg import Msg

from . import metrics as m
from .core import failures
from .download import Fetcher

log = logging.getLogger("ezat.fetcher")

# 32 downloads of at most 10 MB each bound the memory a replica holds for bodies.
MAX_CONCURRENT = 32
UNREADABLE = "the fetch request could not be read"


class FetchService:
    """Answers fetch requests on ``subjects.fetch`` in the fetcher queue group."""

    def __init__(
        self,
        nc: Client,
        subjects: Subjects,
        fetcher: Fetcher,
        *,
        max_concurrent: int = MAX_CONCURRENT,
    ) -> None:
        self._nc = nc
        self._subjects = subjects
        self._fetcher = fetcher
        self._claims = bus.Claims(nc, subjects)
        self._slots = asyncio.Semaphore(max_concurrent)
        self._tasks: set[asyncio.Task[None]] = set()
        self._sub: Any = None

    async def start(self) -> None:
        self._sub = await self._nc.subscribe(
            self._subjects.fetch, queue=QUEUE_FETCHER, cb=self._on_msg
        )

    async def problem(self) -> str | None:
        """Readiness: None when requests can be received, else what is missing."""
        if not self._nc.is_connected:
            return "not connected to NATS"
        if self._sub is None:
            return "not subscribed"
        return None

    async def stop(self, grace: float = 20.0) -> None:
        """Stop taking requests, let running downloads answer (bounded), cancel the rest."""
        # Drain, not unsubscribe: requests already delivered here are still answered.
        sub, self._sub = self._sub, None
        await lifecycle.stop_taking(sub)
        if self._tasks:
            _, late = await asyncio.wait(set(self._tasks), timeout=grace)
            for task in late:
                task.cancel()

    async def _on_msg(self, msg: Msg) -> None:
        if not msg.reply:
            return  # request/reply only: with nobody to answer, a download is wasted
        task = asyncio.create_task(self._answer(msg))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _answer(self, msg: Msg) -> None:
        result = await self.result_for(msg.data)
        try:
            await msg.respond(envelopes.encode(result))
        except Exception as exc:  # the connection is going away; the caller times out
            log.warning("fetch reply not sent: %s", type(exc).__name__)

    async def result_for(self, raw: bytes) -> envelopes.FetchResult:
        """The reply to one encoded FetchRequest; never raises for a bad URL or file."""
        try:
            req = envelopes.decode_fetch_request(raw)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            log.warning("unreadable fetch request: %s", exc)
            return envelopes.FetchResult(request_id="", ok=False, error=UNREADABLE)
        logs.request_id.set(req.request_id)  # this task's context only
        started = time.monotonic()
        async with self._slots:
            m.IN_FLIGHT.inc()
            try:
                return await self._download(req, started)
            finally:
                m.IN_FLIGHT.dec()

    async def _download(self, req: envelopes.FetchRequest, started: float) -> envelopes.FetchResult:
        fields: dict[str, object] = {"part": req.part, "host": _host(req.url)}
        try:
            got = await self._fetcher.fetch(req.url, max_bytes=req.max_bytes, kind=req.kind)
            data, ref = await self._claims.pack(got.data)
        except failures.Failure as failure:
            return self._refused(req, failure, started, fields)
        except Exception:
            log.exception("fetch failed unexpectedly", extra={"fields": fields})
            return self._refused(req, failures.internal(req.kind), started, fields)
        seconds = time.monotonic() - started
        m.record("ok", seconds, len(got.data))
        fields |= {"bytes": len(got.data), "media_type": got.media_type, "claim": ref is not None}
        log.info("fetched", extra={"fields": fields | {"seconds": round(seconds, 3)}})
        return envelopes.FetchResult(
            request_id=req.request_id, ok=True, media_type=got.media_type, data=data, data_ref=ref
        )

    @staticmethod
    def _refused(
        req: envelopes.FetchRequest,
        failure: failures.Failure,
        started: float,
        fields: dict[str, object],
    ) -> envelopes.FetchResult:
        seconds = time.monotonic() - started
        m.record(failure.outcome, seconds)
        log.info("fetch refused", extra={"fields": fields | {"outcome": failure.outcome}})
        return envelopes.FetchResult(request_id=req.request_id, ok=False, error=failure.message)


def _host(url: str) -> str:
    """For logs: the host only, since paths and queries of signed URLs carry secrets."""
    try:
        return urlsplit(url).hostname or ""
    except ValueError:
        return ""
