"""Fair shares of the download slots: no key, and no request, can starve the others.

Pure bookkeeping, no sockets and no asyncio (the handler drives it, tests drive it by hand):

- at most ``total`` downloads run at once (memory: each may hold 10 MB);
- at most ``per_key`` of them for one key, well below ``total``, so a key that floods the
  fetcher with stalled URLs leaves slots free for every other key;
- at most ``per_request`` for one request, so one request of a key cannot hold all of that key's
  slots while its other requests wait;
- waiting downloads are started round-robin: keys in turn (the key served least recently first),
  and within a key its requests in turn, each request's downloads in arrival order;
- a waiting download whose deadline has passed is never started (``grant`` hands it back as
  expired), and at most ``queued_per_key`` downloads of one key may wait (``submit`` refuses more).

Slots are not pre-empted: a running download keeps its slot until it ends (its own 15 s limit,
its request's deadline, or a cancel).
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar

T = TypeVar("T")
K = TypeVar("K")

State = Literal["queued", "running", "done"]


@dataclass(frozen=True)
class Limits:
    total: int = 32
    per_key: int = 8
    per_request: int = 4
    queued_per_key: int = 200

    def problem(self) -> tuple[str, str] | None:
        """(limit, what is wrong with it), or None when the limits can be used."""
        for name in ("total", "per_key", "per_request", "queued_per_key"):
            if getattr(self, name) < 1:
                return name, "must be at least 1"
        if self.per_key > self.total:
            return "per_key", "must not exceed max_concurrent"
        if self.per_request > self.per_key:
            return "per_request", "must not exceed max_per_key"
        return None


@dataclass(eq=False)
class Ticket(Generic[T]):
    """One download's place: queued, then running, then done. ``deadline`` is on the caller's
    clock (the handler uses ``time.monotonic``)."""

    key: str
    request: str
    deadline: float
    item: T
    state: State = field(default="queued", init=False)


@dataclass(frozen=True)
class Grants(Generic[T]):
    started: list[Ticket[T]]
    # Were waiting and met on the way with their deadline passed: removed, never started; the
    # caller answers them. (A waiting ticket not met here is released by its own waiter's timer.)
    expired: list[Ticket[T]]


class Scheduler(Generic[T]):
    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.running = 0
        self._running_by_key: dict[str, int] = {}
        self._running_by_request: dict[tuple[str, str], int] = {}
        # key -> request -> its waiting tickets. The order of both dicts is the rotation: the
        # first entry is served next, and a served entry moves to the end.
        self._waiting: OrderedDict[str, OrderedDict[str, deque[Ticket[T]]]] = OrderedDict()
        self._waiting_by_key: dict[str, int] = {}
        # request -> every ticket not done (queued or running), for cancellation.
        self._by_request: dict[str, set[Ticket[T]]] = {}

    @property
    def queued(self) -> int:
        return sum(self._waiting_by_key.values())

    def running_for(self, key: str, request: str | None = None) -> int:
        if request is None:
            return self._running_by_key.get(key, 0)
        return self._running_by_request.get((key, request), 0)

    def submit(self, ticket: Ticket[T]) -> bool:
        """Queue a download; False (and nothing queued) when its key already has too many
        waiting. Call ``grant`` afterwards to start what may start."""
        waiting = self._waiting_by_key.get(ticket.key, 0)
        if waiting >= self.limits.queued_per_key:
            return False
        self._waiting_by_key[ticket.key] = waiting + 1
        requests = self._waiting.setdefault(ticket.key, OrderedDict())
        requests.setdefault(ticket.request, deque()).append(ticket)
        self._by_request.setdefault(ticket.request, set()).add(ticket)
        return True

    def grant(self, now: float) -> Grants[T]:
        """Start every waiting download that may start now, fairly; drop the expired ones."""
        started: list[Ticket[T]] = []
        expired: list[Ticket[T]] = []
        while self.running < self.limits.total:
            ticket = self._next(now, expired)
            if ticket is None:
                break
            ticket.state = "running"
            self.running += 1
            self._add(self._running_by_key, ticket.key, 1)
            self._add(self._running_by_request, (ticket.key, ticket.request), 1)
            started.append(ticket)
        for ticket in expired:
            self._finish(ticket)
        return Grants(started, expired)

    def release(self, ticket: Ticket[T]) -> None:
        """The download ended (answered, failed, cancelled) or stopped waiting: free its place.
        Idempotent. Call ``grant`` afterwards: a slot may have opened."""
        if ticket.state == "queued":
            self._unqueue(ticket)
        elif ticket.state == "running":
            self.running -= 1
            self._add(self._running_by_key, ticket.key, -1)
            self._add(self._running_by_request, (ticket.key, ticket.request), -1)
        self._finish(ticket)

    def tickets_of(self, request: str) -> list[Ticket[T]]:
        """The request's downloads not done yet (waiting or running)."""
        return list(self._by_request.get(request, ()))

    # ---- internals -------------------------------------------------------------------------

    def _next(self, now: float, expired: list[Ticket[T]]) -> Ticket[T] | None:
        """The next ticket to start: first key in rotation with a free key slot, within it the
        first request in rotation with a free request slot. Expired heads are dropped on the way."""
        limits = self.limits
        for key in list(self._waiting):
            if self._running_by_key.get(key, 0) >= limits.per_key:
                continue
            requests = self._waiting[key]
            for request in list(requests):
                if self._running_by_request.get((key, request), 0) >= limits.per_request:
                    continue
                queue = requests[request]
                while queue and queue[0].deadline <= now:
                    late = queue[0]
                    self._unqueue(late)
                    expired.append(late)
                if request not in requests:
                    continue  # every ticket of it had expired
                ticket = queue[0]
                self._unqueue(ticket)
                if request in requests:
                    requests.move_to_end(request)
                if key in self._waiting:
                    self._waiting.move_to_end(key)
                return ticket
        return None

    def _unqueue(self, ticket: Ticket[T]) -> None:
        requests = self._waiting.get(ticket.key)
        if requests is None:
            return
        queue = requests.get(ticket.request)
        if queue is None:
            return
        try:
            queue.remove(ticket)
        except ValueError:
            return
        self._add(self._waiting_by_key, ticket.key, -1)
        if not queue:
            del requests[ticket.request]
        if not requests:
            del self._waiting[ticket.key]

    def _finish(self, ticket: Ticket[T]) -> None:
        ticket.state = "done"
        tickets = self._by_request.get(ticket.request)
        if tickets is not None:
            tickets.discard(ticket)
            if not tickets:
                del self._by_request[ticket.request]

    @staticmethod
    def _add(counts: dict[K, int], key: K, delta: int) -> None:
        value = counts.get(key, 0) + delta
        if value > 0:
            counts[key] = value
        else:
            counts.pop(key, None)
