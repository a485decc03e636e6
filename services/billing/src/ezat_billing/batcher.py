"""Group commit: many usage records, one transaction, and an acknowledgement that means durable.

``submit(row)`` queues the row and waits; a single writer task takes up to ``max_batch`` pending
rows, stores them in one transaction and only then resolves their waiters. While PostgreSQL is
unreachable the writer retries with backoff, and every waiter has its own deadline.

The invariant that protects the client: an error answer means the row is not stored and never will
be. So a waiter gives up only while its row is *queued*; a row whose transaction is in flight waits
for the outcome. A row whose write lost its answer (connection dropped, timeout) is *in doubt*:
it is retried while its waiter has time (the insert is idempotent, so the retry tells the truth),
and after the deadline it is only probed: found means acknowledged, absent means failed, and it is
never inserted late.
"""

from __future__ import annotations

import asyncio
import collections
import enum
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from ezat_common.tasks import stop_task

from . import metrics
from .core.rows import UsageRow
from .store import OutcomeUnknown, Stored

log = logging.getLogger("ezat.billing.batcher")

WriteRows = Callable[[Sequence[UsageRow]], Awaitable[dict[str, Stored]]]
ProbeRows = Callable[[Sequence[UsageRow]], Awaitable[dict[str, int]]]

DEFAULT_DEADLINE = 2.0
DEFAULT_MAX_BATCH = 500


_LATE = "usage record not stored within its deadline; not charged"


class DeadlineExceeded(Exception):
    """The record could not be stored in time; it is not stored and never will be."""


class BatcherStopped(Exception):
    """The service is stopping and did not store the record."""


class StoppedInDoubt(BatcherStopped):
    """The service stopped while the record's write was unconfirmed: it may be stored. Not an
    answer that allows telling the client "not charged"."""


class _State(enum.Enum):
    QUEUED = "queued"
    WRITING = "writing"
    ABANDONED = "abandoned"  # the waiter gave up while queued: the row must not be written
    DONE = "done"  # answered: never written again


@dataclass(eq=False)
class _Waiter:
    row: UsageRow
    future: asyncio.Future[Stored]
    deadline: float  # loop.time()
    state: _State = _State.QUEUED
    in_doubt: bool = False


class Batcher:
    """One writer task over a queue of waiting rows; ``batches`` counts committed transactions."""

    def __init__(
        self,
        write: WriteRows,
        probe: ProbeRows,
        *,
        deadline: float = DEFAULT_DEADLINE,
        max_batch: int = DEFAULT_MAX_BATCH,
        backoff: float = 0.05,
        max_backoff: float = 0.5,
    ) -> None:
        self._write_rows = write
        self._probe_rows = probe
        self._deadline = deadline
        self._max_batch = max_batch
        self._backoff = backoff
        self._max_backoff = max_backoff
        self._queue: collections.deque[_Waiter] = collections.deque()
        self._wake = asyncio.Event()
        self._writing: list[_Waiter] = []  # the batch of the attempt in flight
        self._closed = False
        self._task: asyncio.Task[None] | None = None
        self._failures = 0  # consecutive failed attempts: an outage logs once, not per retry
        self._last_ok = True
        self.batches = 0
        self.attempts = 0

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="billing-batcher")

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    @property
    def pending(self) -> int:
        return sum(1 for w in self._queue if w.state is not _State.ABANDONED)

    @property
    def healthy(self) -> bool:
        """False while the last write attempt failed (PostgreSQL down or erroring)."""
        return self._last_ok

    async def submit(self, row: UsageRow, deadline: float | None = None) -> Stored:
        """Wait until ``row`` is durable; its stored cost (the earlier one for a duplicate).

        ``deadline`` (seconds) overrides the batcher's own for this row.
        """
        if self._closed:
            raise BatcherStopped("billing is stopping")
        limit = self._deadline if deadline is None else deadline
        loop = asyncio.get_running_loop()
        waiter = _Waiter(row, loop.create_future(), loop.time() + limit)
        self._queue.append(waiter)
        self._wake.set()
        try:
            return await asyncio.wait_for(asyncio.shield(waiter.future), limit)
        except TimeoutError:
            if waiter.state is _State.QUEUED and not waiter.in_doubt:
                waiter.state = _State.ABANDONED  # the writer skips it from now on
                raise DeadlineExceeded(
                    f"usage record not stored within {limit:g}s; not charged"
                ) from None
            # A transaction holding the row is in flight (or was, and its outcome is unknown):
            # only the database can tell, so wait for the writer's verdict.
            return await waiter.future
        except asyncio.CancelledError:
            if waiter.state is _State.QUEUED and not waiter.in_doubt:
                waiter.state = _State.ABANDONED
            raise

    async def stop(self, timeout: float = 5.0) -> None:
        """Take no more rows, let the pending ones finish (or expire), then end the writer."""
        self._closed = True
        end = time.monotonic() + timeout
        while (self.pending or self._writing) and time.monotonic() < end:
            await asyncio.sleep(0.01)
        # Never cancel a write mid-statement (its rows could commit after being answered "not
        # stored"): wait for the attempt in flight, bounded by its own timeout.
        while self._writing and time.monotonic() < end + timeout:
            await asyncio.sleep(0.01)
        inflight = list(self._writing)
        for waiter in inflight:
            waiter.in_doubt = True  # about to be cancelled mid-write: its statement may have run
        await stop_task(self._task)
        for waiter in [*inflight, *self._queue]:
            if waiter.state in (_State.QUEUED, _State.WRITING):
                cls = StoppedInDoubt if waiter.in_doubt else BatcherStopped
                _fail(waiter, cls(_stopped(waiter)))
        self._queue.clear()

    async def _run(self) -> None:
        delay = self._backoff
        while True:
            await self._wake.wait()
            batch = self._take()
            if not batch:
                self._wake.clear()
                continue
            self._writing = batch
            try:
                ok = await self._attempt(batch)
            finally:
                self._writing = []
            if ok:
                delay = self._backoff
            else:
                await asyncio.sleep(delay)
                delay = min(delay * 2, self._max_backoff)

    def _take(self) -> list[_Waiter]:
        batch: list[_Waiter] = []
        while self._queue and len(batch) < self._max_batch:
            waiter = self._queue.popleft()
            if waiter.state is _State.QUEUED:  # abandoned rows are dropped here, never written
                waiter.state = _State.WRITING
                batch.append(waiter)
        return batch

    async def _attempt(self, batch: list[_Waiter]) -> bool:
        now = asyncio.get_running_loop().time()
        late = [w for w in batch if w.in_doubt and w.deadline <= now]
        fresh = [w for w in batch if not (w.in_doubt and w.deadline <= now)]
        ok = True
        if fresh:
            ok = await self._write(fresh)
        if late:
            ok = await self._probe(late) and ok
        return ok

    async def _write(self, batch: list[_Waiter]) -> bool:
        self.attempts += 1
        started = time.perf_counter()
        try:
            stored = await self._write_rows([w.row for w in batch])
        except OutcomeUnknown as exc:
            self._last_ok = False
            metrics.WRITE_FAILURES.labels("unknown").inc()
            log.warning("outcome of writing %d usage records unknown: %s", len(batch), exc)
            for waiter in batch:
                waiter.in_doubt = True
            self._requeue(batch)
            return False
        except Exception as exc:
            self._last_ok = False
            metrics.WRITE_FAILURES.labels("rolled_back").inc()
            self._failures += 1
            level = logging.WARNING if self._failures == 1 else logging.DEBUG
            log.log(level, "writing %d usage records failed, retrying: %r", len(batch), exc)
            self._requeue(batch)
            return False
        finally:
            metrics.WRITE_SECONDS.observe(time.perf_counter() - started)
        self._last_ok = True
        if self._failures:
            log.info("usage records written again after %d failed attempts", self._failures)
            self._failures = 0
        self.batches += 1
        metrics.BATCH_SIZE.observe(len(batch))
        for waiter in batch:
            result = stored[waiter.row.uid]
            _count(result)
            _resolve(waiter, result)
        return True

    async def _probe(self, batch: list[_Waiter]) -> bool:
        try:
            found = await self._probe_rows([w.row for w in batch])
        except Exception as exc:
            log.warning("checking %d in-doubt usage records failed: %r", len(batch), exc)
            self._requeue(batch)
            return False
        for waiter in batch:
            cost = found.get(waiter.row.uid)
            if cost is None:
                _fail(waiter, DeadlineExceeded(_LATE))
            else:
                _resolve(waiter, Stored(cost, False))
        return True

    def _requeue(self, batch: list[_Waiter]) -> None:
        """Put a failed batch back at the head of the queue, minus the rows now out of time."""
        now = asyncio.get_running_loop().time()
        keep: list[_Waiter] = []
        for waiter in batch:
            waiter.state = _State.QUEUED
            if waiter.deadline <= now and not waiter.in_doubt:
                # Its waiter saw it in flight at the deadline and is waiting for this verdict.
                _fail(waiter, DeadlineExceeded(_LATE))
            else:
                keep.append(waiter)
        self._queue.extendleft(reversed(keep))


def _resolve(waiter: _Waiter, result: Stored) -> None:
    waiter.state = _State.DONE
    if not waiter.future.done():
        waiter.future.set_result(result)


def _fail(waiter: _Waiter, exc: Exception) -> None:
    waiter.state = _State.DONE
    if not waiter.future.done():
        waiter.future.set_exception(exc)
        # Mark it retrieved: a waiter that was cancelled meanwhile must not log a stray traceback.
        waiter.future.exception()


def _stopped(waiter: _Waiter) -> str:
    if waiter.in_doubt:
        return "billing stopped while the record's write was unconfirmed"
    return "billing stopped before the record was stored; not charged"


def _count(result: Stored) -> None:
    # Stored rows are counted by the store, from what it inserted (ledger.py).
    if not result.inserted:
        metrics.DUPLICATES.inc()
