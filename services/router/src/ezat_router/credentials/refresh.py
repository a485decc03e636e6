"""A cached credential kept fresh by a background task (docs/routing.md, "Credentials").

Credential libraries (botocore, google-auth) refresh with blocking network I/O. Here the fetch
runs in a worker thread (``asyncio.to_thread``) ahead of expiry, and the request path only reads
the cached value (``Refresher.current``), so no request ever waits on a refresh or blocks the
event loop. A failed refresh keeps the old value until it actually expires and is retried with
backoff; ``RefreshStats`` counts both for the caller's metrics.

``next_refresh`` and ``retry_delay`` are the pure schedule, tested without a clock.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from ezat_common.tasks import stop_task

T = TypeVar("T")
log = logging.getLogger("ezat.router")

# Refresh when less than this remains (or half the lifetime, for short-lived credentials), and
# at least this often (botocore's own advisory window is 15 minutes), whatever the clock did.
DEFAULT_MARGIN = 300.0
DEFAULT_EVERY = 900.0
# A credential is not sent in its last seconds (10, or a tenth of a short lifetime): the expiry
# is the client's reckoning, a little later than the issuer's, and a request takes time to land.
EXPIRY_SKEW = 10.0
BACKOFF_FIRST = 1.0
BACKOFF_MAX = 30.0


class CredentialsUnavailable(Exception):
    """No valid credential right now (expired, refresh failing): the deployment cannot be
    called. The message names the source and the error type, never a secret."""


@dataclass(frozen=True, slots=True)
class Fetched(Generic[T]):
    """One fetch's result; ``expires_at`` in epoch seconds, None for a credential that does not
    expire (a static key)."""

    value: T
    expires_at: float | None


@dataclass(frozen=True, slots=True)
class RefreshStats:
    """What a source's refresh loop has done, for metrics: successful refreshes after the first
    fetch, failed attempts (and how many in a row), the current expiry, the last error's type."""

    source: str
    refreshes: int = 0
    failures: int = 0
    consecutive_failures: int = 0
    expires_at: float | None = None
    last_error: str | None = None


def next_refresh(
    now: float,
    fetched_at: float,
    expires_at: float | None,
    margin: float = DEFAULT_MARGIN,
    every: float = DEFAULT_EVERY,
) -> float:
    """Seconds until the next refresh of a credential fetched at ``fetched_at``: ``margin``
    before its expiry, or half its lifetime before it when that is shorter (a few-second token
    is not refreshed continuously), and never later than ``every``."""
    if expires_at is None:
        return every
    lead = min(margin, max(0.0, expires_at - fetched_at) / 2)
    return max(0.0, min(every, expires_at - lead - now))


def usable_until(fetched_at: float, expires_at: float | None) -> float | None:
    """When a credential fetched at ``fetched_at`` stops being sent (None: never)."""
    if expires_at is None:
        return None
    return expires_at - min(EXPIRY_SKEW, max(0.0, expires_at - fetched_at) / 10)


def retry_delay(consecutive_failures: int) -> float:
    """Seconds before retrying after the n-th failure in a row: 1, 2, 4, ... up to 30."""
    return min(BACKOFF_MAX, BACKOFF_FIRST * 2.0 ** max(0, consecutive_failures - 1))


def error_text(exc: BaseException) -> str:
    """An error as reported: its type and the start of its message. The libraries' messages
    name what failed (a file, an endpoint, a grant error), not the credential itself."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text[:200]}" if text else type(exc).__name__


class Refresher(Generic[T]):
    """Holds a credential fetched by ``fetch`` (blocking; always run in a thread) and refreshes
    it in the background. ``describe`` turns a fetch error into a message without secrets."""

    def __init__(
        self,
        source: str,
        fetch: Callable[[], Fetched[T]],
        *,
        margin: float = DEFAULT_MARGIN,
        every: float = DEFAULT_EVERY,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.source = source
        self._fetch = fetch
        self._margin = margin
        self._every = every
        self._clock = clock
        self._current: Fetched[T] | None = None
        self._fetched_at = 0.0
        self._usable_until: float | None = None
        self._task: asyncio.Task[None] | None = None
        self._stats = RefreshStats(source)

    async def start(self) -> None:
        """The first fetch (its error propagates: the caller says what was looked for), then
        the refresh loop."""
        first = await asyncio.to_thread(self._fetch)
        self._store(first)
        self._stats = RefreshStats(self.source, expires_at=first.expires_at)
        if first.expires_at is not None:  # static credentials have nothing to refresh
            self._task = asyncio.create_task(self._loop(), name=f"credentials {self.source}")

    async def close(self) -> None:
        task, self._task = self._task, None
        # A fetch already running in its thread finishes there; its result is dropped.
        await stop_task(task)

    def ready(self) -> bool:
        if self._current is None:
            return False
        return self._usable_until is None or self._clock() < self._usable_until

    def current(self) -> T:
        """The cached credential; raises ``CredentialsUnavailable`` once it has (nearly)
        expired."""
        current = self._current
        if current is None:
            raise CredentialsUnavailable(f"{self.source}: not started")
        if self._usable_until is not None and self._clock() >= self._usable_until:
            why = self._stats.last_error or "not refreshed yet"
            raise CredentialsUnavailable(f"{self.source}: the credential expired ({why})")
        return current.value

    def stats(self) -> RefreshStats:
        return self._stats

    def _store(self, fetched: Fetched[T]) -> None:
        self._current = fetched
        self._fetched_at = now = self._clock()
        self._usable_until = usable_until(now, fetched.expires_at)

    async def _loop(self) -> None:
        delay = self._delay_after_success()
        while True:
            await asyncio.sleep(delay)
            delay = await self._refresh_once()

    def _delay_after_success(self) -> float:
        expires_at = None if self._current is None else self._current.expires_at
        return next_refresh(self._clock(), self._fetched_at, expires_at, self._margin, self._every)

    async def _refresh_once(self) -> float:
        """One refresh; the delay before the next."""
        s = self._stats
        try:
            fetched = await asyncio.to_thread(self._fetch)
            if fetched.expires_at is not None and fetched.expires_at <= self._clock():
                raise CredentialsUnavailable("the refreshed credential has already expired")
        except Exception as exc:  # any library error: keep the old value, retry with backoff
            failures = s.consecutive_failures + 1
            error = error_text(exc)
            self._stats = RefreshStats(
                s.source, s.refreshes, s.failures + 1, failures, s.expires_at, error
            )
            # What the library said names what failed, never the credential (error_text).
            fields = {"source": s.source, "error": error, "consecutive": failures}
            log.warning("credential refresh failed", extra={"fields": fields})
            return retry_delay(failures)
        self._store(fetched)
        self._stats = RefreshStats(s.source, s.refreshes + 1, s.failures, 0, fetched.expires_at)
        return self._delay_after_success()
