"""NATS handler: FetchRequest in, FetchResult out; each request in its own task.

Thin: decode -> wait for a fair share of the download slots (core/fairness.py) ->
``Fetcher.fetch`` -> pack the bytes (inline, or a claim check above the message limit) -> respond.
Downloads are slow, so the subscription callback only queues the download and starts a task.

While a request is held (waiting for a slot or downloading) its reply subject gets a
``Heartbeat`` every second (liveness.py): the caller gives up 3 s after the last sign of life
instead of after a fixed wait, so a dead fetcher costs its callers 3 s, not 20.

A download never outlives its request: the caller's ``timeout`` bounds the wait and the download
(a waiting download past it never starts; a running one is cut), and a broadcast
``CancelRequest`` for the request (the client left, the translator gave up) drops its waiting
downloads and cancels its running ones.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from ezat_common import bus, envelopes, lifecycle, logs, readiness, tracing
from ezat_common.liveness import Heartbeats
from ezat_common.subjects import IMAGES, QUEUE_FETCHER, Subjects
from ezat_common.undecodable import decoded
from nats.aio.client import Client
from nats.aio.msg import Msg

from . import metrics as m
from .core import failures
from .core.fairness import Limits, Scheduler, Ticket
from .download import Fetcher

if TYPE_CHECKING:
    from opentelemetry.trace import Span

log = logging.getLogger("ezat.fetcher")

UNREADABLE = "the fetch request could not be read"
# A request without a timeout (an older translator, which waited 20 s in all).
DEFAULT_WAIT = 20.0
# No caller holds a download slot's queue place longer than this, whatever it asks.
MAX_WAIT = 120.0
RETRY_AFTER = 2.0
BUSY = "the image could not be downloaded right now (the image fetcher is busy); retry shortly"
LATE = "the image could not be downloaded in time; retry shortly"
CANCELLED = "the request was cancelled"
STOPPING = "the image could not be downloaded right now (the image fetcher is restarting); retry"
# Cancels for requests this replica does not hold (yet): a cancel may overtake the request.
REMEMBERED_CANCELS = 4096
CANCEL_MEMORY_SECONDS = 30.0

# cancelled: by a CancelRequest; sibling: another download of the request failed and the caller
# fails the request on that answer (``fail_together``), so this one gets none; stopping: shutdown.
Reason = Literal["cancelled", "sibling", "stopping"]


@dataclass(eq=False)
class _Job:
    msg: Msg
    req: envelopes.FetchRequest
    # Resolved when the scheduler grants a slot; TimeoutError when it dropped the job as expired.
    granted: asyncio.Future[None]
    ticket: Ticket[_Job] = field(init=False)
    task: asyncio.Task[None] | None = None
    running: bool = False
    # Why the task was cancelled on purpose (None: the task is being torn down, no reply).
    reason: Reason | None = None
    received: float = field(default_factory=time.monotonic)

    def age(self) -> float:
        return time.monotonic() - self.received


class FetchService:
    """Answers fetch requests on ``subjects.fetch`` in the fetcher queue group."""

    def __init__(
        self,
        nc: Client,
        subjects: Subjects,
        fetcher: Fetcher,
        *,
        limits: Limits | None = None,
    ) -> None:
        self._nc = nc
        self._subjects = subjects
        self._fetcher = fetcher
        self._claims = bus.Claims(nc, subjects, None)
        self._scheduler: Scheduler[_Job] = Scheduler(limits or Limits())
        self._heartbeats = Heartbeats(nc)
        self._jobs: dict[asyncio.Task[None], _Job] = {}
        self._sub: Any = None
        self._cancel_sub: Any = None
        # Remembered cancels: request identity -> when the memory of it expires (monotonic).
        self._cancelled: OrderedDict[str, float] = OrderedDict()

    @property
    def scheduler(self) -> Scheduler[_Job]:
        return self._scheduler

    async def start(self) -> None:
        self._heartbeats.start()
        # Broadcast: every replica hears every cancel and drops the downloads it holds for it.
        self._cancel_sub = await self._nc.subscribe(self._subjects.cancel, cb=self.on_cancel)
        self._sub = await self._nc.subscribe(
            self._subjects.fetch, queue=QUEUE_FETCHER, cb=self._on_msg
        )

    async def checks(self) -> dict[str, str]:
        """Readiness (``ezat_common.readiness``): fetch requests can be received. The fetcher
        keeps no store: NATS and its subscriptions are all it needs."""
        return readiness.nats_check(self._nc, self._sub, self._cancel_sub)

    async def stop(self, grace: float = 20.0) -> None:
        """Stop taking requests, let held downloads answer (bounded), tell the rest to retry."""
        # Drain, not unsubscribe: requests already delivered here are still answered.
        sub, self._sub = self._sub, None
        await lifecycle.stop_taking(sub)
        if self._jobs:
            _, late = await asyncio.wait(set(self._jobs), timeout=grace)
            for task in late:
                self._cancel(self._jobs[task].ticket, "stopping")
            if late:
                await asyncio.wait(late, timeout=1.0)
        if self._cancel_sub is not None:
            await self._cancel_sub.unsubscribe()
            self._cancel_sub = None
        await self._heartbeats.stop()

    # ---- requests --------------------------------------------------------------------------

    async def _on_msg(self, msg: Msg) -> None:
        if not msg.reply:
            return  # request/reply only: with nobody to answer, a download is wasted
        req = decoded(envelopes.decode_fetch_request, "fetch_request", msg)
        if req is None:
            await self._respond(
                msg, envelopes.FetchResult(request_id="", ok=False, error=UNREADABLE)
            )
            return
        request = req.uid
        if self._was_cancelled(request):
            m.record("cancelled", 0.0)
            await self._respond(msg, _failed(req, CANCELLED))
            return
        loop = asyncio.get_running_loop()
        wait = min(req.timeout if req.timeout > 0 else DEFAULT_WAIT, MAX_WAIT)
        job = _Job(msg, req, loop.create_future())
        # A caller that sends no key (an older translator): each request is a key of its own, so
        # its requests still take turns rather than sharing one key's slots.
        key = req.key_id or f"request:{request}"
        ticket = Ticket(key=key, request=request, deadline=loop.time() + wait, item=job)
        job.ticket = ticket
        if not self._scheduler.submit(ticket):
            m.record("busy", 0.0)
            log.info("fetch refused: too many waiting for the key", extra={"fields": _fields(req)})
            await self._respond(msg, _failed(req, BUSY))
            return
        if req.heartbeat:
            self._heartbeats.open(msg.reply)
        job.task = task = asyncio.create_task(self._serve(ticket))
        self._jobs[task] = job
        task.add_done_callback(self._forget)
        self._pump()

    def _forget(self, task: asyncio.Task[None]) -> None:
        self._jobs.pop(task, None)

    def _pump(self) -> None:
        """Start what may start now; fail what the scheduler dropped as expired."""
        grants = self._scheduler.grant(asyncio.get_running_loop().time())
        for ticket in grants.started:
            if not ticket.item.granted.done():
                ticket.item.granted.set_result(None)
        for ticket in grants.expired:
            if not ticket.item.granted.done():
                ticket.item.granted.set_exception(TimeoutError())
        m.QUEUED.set(self._scheduler.queued)

    async def _serve(self, ticket: Ticket[_Job]) -> None:
        if not tracing.ENABLED:
            return await self._serve_job(ticket)
        span = download_span(ticket.item)
        try:
            await self._serve_job(ticket, span)
        except BaseException as exc:
            tracing.failed(span, type(exc).__name__)
            raise
        finally:
            span.end()

    async def _serve_job(self, ticket: Ticket[_Job], span: Span | None = None) -> None:
        job, req = ticket.item, ticket.item.req
        logs.request_id.set(req.request_id)  # this task's context only
        result: envelopes.FetchResult
        try:
            try:
                async with asyncio.timeout_at(ticket.deadline):
                    await job.granted
                    job.running = True
                    m.IN_FLIGHT.inc()
                    try:
                        result = await self._download(req, job.received)
                    finally:
                        m.IN_FLIGHT.dec()
                if req.fail_together and not result.ok:
                    # The caller fails the whole request on this answer: its other downloads
                    # are wasted, and must not take the slot this one frees.
                    self._cancel_request(ticket.request, "sibling", but=ticket)
                    self._remember_cancel(ticket.request)
            except TimeoutError:
                outcome, message = ("late", LATE) if job.running else ("expired", BUSY)
                m.record(outcome, job.age())
                log.info("fetch not done in time", extra={"fields": _fields(req, outcome)})
                result = _failed(req, message)
        except asyncio.CancelledError:
            if job.reason is None:
                raise
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()  # our own cancel, answered below
            m.record("stopping" if job.reason == "stopping" else "cancelled", job.age())
            if job.reason == "sibling":
                return  # after the finally below: the caller has its answer, the failure
            result = _failed(req, CANCELLED if job.reason == "cancelled" else STOPPING)
        finally:
            self._scheduler.release(ticket)
            self._heartbeats.close(job.msg.reply)
            self._pump()
        if span is not None:
            span.set_attribute("ezat.fetch.ok", result.ok)
            if not result.ok:
                tracing.failed(span, "refused")
        await self._respond(job.msg, result)

    async def _respond(self, msg: Msg, result: envelopes.FetchResult) -> None:
        try:
            await msg.respond(envelopes.encode(result))
        except Exception as exc:  # the connection is going away; the caller notices the silence
            log.warning("fetch reply not sent: %s", type(exc).__name__)

    async def _download(self, req: envelopes.FetchRequest, started: float) -> envelopes.FetchResult:
        fields = _fields(req)
        try:
            got = await self._fetcher.fetch(req.url, max_bytes=req.max_bytes, kind=req.kind)
            data, ref = await self._claims.pack(got.data, IMAGES)
        except failures.FetchFailure as failure:
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
        failure: failures.FetchFailure,
        started: float,
        fields: dict[str, object],
    ) -> envelopes.FetchResult:
        seconds = time.monotonic() - started
        m.record(failure.outcome, seconds)
        log.info("fetch refused", extra={"fields": fields | {"outcome": failure.outcome}})
        return envelopes.FetchResult(request_id=req.request_id, ok=False, error=failure.message)

    # ---- cancellation ----------------------------------------------------------------------

    async def on_cancel(self, msg: Msg) -> None:
        cancel = decoded(envelopes.decode_cancel, "cancel", msg)
        if cancel is None:
            return
        request = cancel.uid
        if not self._cancel_request(request, "cancelled"):
            self._remember_cancel(request)
        self._pump()

    def _cancel_request(self, request: str, reason: Reason, but: Ticket[_Job] | None = None) -> int:
        """Drop the request's waiting downloads and cancel its running ones; how many."""
        tickets = [t for t in self._scheduler.tickets_of(request) if t is not but]
        for ticket in tickets:
            self._cancel(ticket, reason)
        return len(tickets)

    def _cancel(self, ticket: Ticket[_Job], reason: Reason) -> None:
        # Out of the queue now, not when its task runs: the slot must not be granted to it.
        self._scheduler.release(ticket)
        job = ticket.item
        if job.task is not None and not job.task.done() and job.reason is None:
            job.reason = reason
            job.task.cancel()

    def _remember_cancel(self, request: str) -> None:
        self._forget_old_cancels()
        self._cancelled[request] = time.monotonic() + CANCEL_MEMORY_SECONDS
        self._cancelled.move_to_end(request)
        while len(self._cancelled) > REMEMBERED_CANCELS:
            self._cancelled.popitem(last=False)

    def _was_cancelled(self, request: str) -> bool:
        if not self._cancelled:
            return False
        self._forget_old_cancels()
        return request in self._cancelled

    def _forget_old_cancels(self) -> None:
        now = time.monotonic()
        while self._cancelled:
            request, expires = next(iter(self._cancelled.items()))
            if expires > now:
                break
            del self._cancelled[request]


def _failed(req: envelopes.FetchRequest, message: str) -> envelopes.FetchResult:
    """A failure of the gateway, not of the URL: the caller answers 503 with retry-after."""
    return envelopes.FetchResult(
        request_id=req.request_id, ok=False, error=message, retry_after=RETRY_AFTER
    )


def _fields(req: envelopes.FetchRequest, outcome: str | None = None) -> dict[str, object]:
    fields: dict[str, object] = {"part": req.part, "host": _host(req.url)}
    if outcome is not None:
        fields["outcome"] = outcome
    return fields


def _host(url: str) -> str:
    """For logs: the host only, since paths and queries of signed URLs carry secrets."""
    try:
        return urlsplit(url).hostname or ""
    except ValueError:
        return ""


def download_span(job: _Job) -> Span:
    """The download's span (tracing on), child of the translator's span that asked for it. The
    URL is not recorded: it may carry a signature."""
    req = job.req
    return tracing.start(
        "fetch " + req.kind,
        tracing.received(job.msg.headers),
        attributes={"ezat.request_id": req.request_id, "ezat.fetch.part": req.part},
    )
