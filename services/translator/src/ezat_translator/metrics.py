"""Translator instruments, declared once (docs/observability.md, "Translator")."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from time import perf_counter
from typing import ParamSpec, TypeVar

from ezat_common.errors import GatewayError
from ezat_common.lean_metrics import LeanCounter, LeanHistogram
from ezat_common.metrics import labelled
from prometheus_client import Counter

REQUESTS = LeanCounter("ezat_translator_requests_total", "Client requests translated", ["api"])
REJECTED = LeanCounter(
    "ezat_translator_rejected_total", "Client requests refused before routing", ["api", "status"]
)
ROUTER_LOST = Counter(
    "ezat_translator_router_lost_total",
    "Chat requests whose router fell silent (retried: sent to another; failed: edge told)",
    ["outcome"],
)
NO_ROUTER = Counter("ezat_translator_no_router_total", "Requests that found no router listening")

TRANSLATIONS = LeanCounter(
    "ezat_translator_translations_total",
    "OpenAI Chat Completions translations by direction (request: OpenAI -> Anthropic; response:"
    " a whole completion back; stream: a whole stream back) and outcome (ok; rejected: the"
    " request was refused with a 4xx; error: the translation failed).",
    ["direction", "outcome"],
)
# The translations are pure CPU work of microseconds to a few milliseconds.
TRANSLATION_BUCKETS = (
    0.000025,
    0.00005,
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
)
TRANSLATION_SECONDS = LeanHistogram(
    "ezat_translator_translation_seconds",
    "CPU time of one translation by direction (a stream: the sum over its chunks).",
    ["direction"],
    buckets=TRANSLATION_BUCKETS,
)

P = ParamSpec("P")
T = TypeVar("T")


class Direction:
    """One direction's children, bound once (no ``labels()`` call per translation)."""

    __slots__ = ("error", "ok", "rejected", "seconds")

    def __init__(self, direction: str) -> None:
        self.ok = TRANSLATIONS.labels(direction, "ok")
        self.rejected = TRANSLATIONS.labels(direction, "rejected")
        self.error = TRANSLATIONS.labels(direction, "error")
        self.seconds = TRANSLATION_SECONDS.labels(direction)

    def run(self, translate: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``translate(*args, **kwargs)``, counted and timed."""
        started = perf_counter()
        try:
            out = translate(*args, **kwargs)
        except BaseException as exc:
            self._failed(exc, started)
            raise
        self.done(perf_counter() - started)
        return out

    async def run_off_loop(self, translate: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``run`` with ``translate`` in a worker thread (a large body: docs/reliability.md),
        counted and timed here: the instruments are written from the loop only. Its time is
        the thread's wall time, GIL waits included."""
        started = perf_counter()
        try:
            out = await asyncio.to_thread(translate, *args, **kwargs)
        except BaseException as exc:
            self._failed(exc, started)
            raise
        self.done(perf_counter() - started)
        return out

    def _failed(self, exc: BaseException, started: float) -> None:
        if isinstance(exc, GatewayError | RecursionError):  # a 4xx (RecursionError: too deep)
            self.rejected.inc()
        elif isinstance(exc, Exception):
            self.error.inc()
        self.seconds.observe(perf_counter() - started)

    def done(self, seconds: float) -> None:
        """A translation timed by its caller (a stream's chunks) ended well."""
        self.ok.inc()
        self.seconds.observe(seconds)


REQUEST = Direction("request")
RESPONSE = Direction("response")
STREAM = Direction("stream")

# Memoised children for the per-request hot path.
REQUESTS_BY = labelled(REQUESTS)

# Stored responses (docs/responses.md, "Stored responses"): writes and reads by outcome.
STORED = Counter(
    "ezat_translator_stored_responses_total",
    "Responses API store operations by outcome",
    ["op", "outcome"],
)

CONVERSATION_RATE_LIMITED = Counter(
    "ezat_translator_conversation_rate_limited_total",
    "Responses continuations refused by the key's tpm once their stored conversation is counted",
)

# How late the event loop wakes a task that asked to sleep (docs/observability.md): what every
# reply, heartbeat and request on this process waited behind at that moment.
LOOP_LAG = LeanHistogram(
    "ezat_translator_event_loop_lag_seconds",
    "Delay of the event loop in waking a periodic task, past its due time.",
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
)
