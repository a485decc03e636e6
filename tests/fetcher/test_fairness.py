"""The fair scheduler of download slots (core/fairness.py), by hand: no sockets, no event loop."""

from __future__ import annotations

import pytest
from ezat_fetcher.core.fairness import Limits, Scheduler, Ticket

FAR = 1e9


def ticket(key: str, request: str, n: int = 0, deadline: float = FAR) -> Ticket[str]:
    return Ticket(key=key, request=request, deadline=deadline, item=f"{key}/{request}/{n}")


def names(tickets: list[Ticket[str]]) -> list[str]:
    return [t.item for t in tickets]


def fill(s: Scheduler[str], key: str, request: str, n: int) -> list[Ticket[str]]:
    out = [ticket(key, request, i) for i in range(n)]
    for t in out:
        assert s.submit(t)
    return out


@pytest.mark.parametrize(
    ("limits", "queued", "started"),
    [
        # One key floods: held to its share, however many slots are free.
        (Limits(total=32, per_key=8, per_request=4), {("a", "r1"): 20, ("a", "r2"): 20}, 8),
        # One request alone: held to the per-request share.
        (Limits(total=32, per_key=8, per_request=4), {("a", "r1"): 20}, 4),
        # Five requests of one key: the key's share, spread 4 + 4 over the first two.
        (Limits(total=32, per_key=8, per_request=4), {("a", f"r{i}"): 20 for i in range(5)}, 8),
        # Many keys: the total caps it.
        (Limits(total=10, per_key=8, per_request=8), {(k, "r"): 5 for k in "abc"}, 10),
    ],
)
def test_caps(limits: Limits, queued: dict[tuple[str, str], int], started: int) -> None:
    s: Scheduler[str] = Scheduler(limits)
    for (key, request), n in queued.items():
        fill(s, key, request, n)
    grants = s.grant(now=0)
    assert len(grants.started) == started == s.running
    assert grants.expired == []
    for (key, request), _ in queued.items():
        assert s.running_for(key) <= limits.per_key
        assert s.running_for(key, request) <= limits.per_request


def test_a_flooding_key_leaves_slots_for_another_key() -> None:
    s: Scheduler[str] = Scheduler(Limits(total=32, per_key=8, per_request=4))
    for i in range(5):
        fill(s, "flood", f"r{i}", 20)
    assert len(s.grant(0).started) == 8
    fill(s, "other", "single", 1)
    assert names(s.grant(0).started) == ["other/single/0"]


def test_waiting_keys_take_turns_for_freed_slots() -> None:
    # A full house of two keys; each freed slot goes to the key served least recently.
    s: Scheduler[str] = Scheduler(Limits(total=2, per_key=2, per_request=2))
    a = fill(s, "a", "ra", 4)
    b = fill(s, "b", "rb", 4)
    c = fill(s, "c", "rc", 1)
    assert names(s.grant(0).started) == ["a/ra/0", "b/rb/0"]
    order = []
    for done in [a[0], b[0], c[0], a[1], b[1], a[2]]:
        s.release(done)
        order += names(s.grant(0).started)
    assert order == ["c/rc/0", "a/ra/1", "b/rb/1", "a/ra/2", "b/rb/2", "a/ra/3"]


def test_requests_of_one_key_take_turns() -> None:
    s: Scheduler[str] = Scheduler(Limits(total=1, per_key=1, per_request=1))
    r1 = fill(s, "a", "r1", 3)
    r2 = fill(s, "a", "r2", 3)
    running = s.grant(0).started
    started = names(running)
    while running:
        s.release(running[0])
        running = s.grant(0).started
        started += names(running)
    # One slot: the requests alternate, each in its own order.
    assert started == ["a/r1/0", "a/r2/0", "a/r1/1", "a/r2/1", "a/r1/2", "a/r2/2"]
    assert all(t.state == "done" for t in [*r1, *r2])


@pytest.mark.parametrize(
    ("deadlines", "now", "started", "expired"),
    [
        ([5.0, 5.0, 20.0], 10.0, ["a/r/2"], ["a/r/0", "a/r/1"]),
        ([5.0, 20.0], 4.9, ["a/r/0", "a/r/1"], []),
        ([5.0], 5.0, [], ["a/r/0"]),  # at the deadline is past it
    ],
)
def test_a_download_past_its_deadline_never_starts(
    deadlines: list[float], now: float, started: list[str], expired: list[str]
) -> None:
    s: Scheduler[str] = Scheduler(Limits(total=4, per_key=4, per_request=4))
    for i, d in enumerate(deadlines):
        s.submit(ticket("a", "r", i, d))
    grants = s.grant(now)
    assert (names(grants.started), names(grants.expired)) == (started, expired)
    assert all(t.state == "done" for t in grants.expired)
    assert s.queued == 0


def test_released_waiting_tickets_never_start_and_free_nothing() -> None:
    s: Scheduler[str] = Scheduler(Limits(total=1, per_key=1, per_request=1))
    first, second, third = fill(s, "a", "r", 3)
    s.grant(0)
    s.release(second)  # cancelled while waiting
    s.release(second)  # idempotent
    assert s.running == 1 and s.queued == 1
    s.release(first)
    assert names(s.grant(0).started) == ["a/r/2"]
    assert second.state == "done"
    s.release(third)
    assert (s.running, s.queued, s.tickets_of("r")) == (0, 0, [])


def test_tickets_of_a_request_are_its_waiting_and_running_ones() -> None:
    s: Scheduler[str] = Scheduler(Limits(total=2, per_key=2, per_request=2))
    tickets = fill(s, "a", "r", 3)
    fill(s, "b", "other", 2)
    s.grant(0)
    assert set(s.tickets_of("r")) == set(tickets)
    assert [t.state for t in tickets] == ["running", "queued", "queued"]
    for t in tickets:
        s.release(t)
    assert s.tickets_of("r") == []
    assert names(s.grant(0).started) == ["b/other/1"]


def test_a_key_may_not_queue_without_bound() -> None:
    s: Scheduler[str] = Scheduler(Limits(total=1, per_key=1, per_request=1, queued_per_key=3))
    assert all(s.submit(ticket("a", "r", i)) for i in range(3))
    assert not s.submit(ticket("a", "r2"))
    assert s.submit(ticket("b", "r3"))  # another key's queue is its own
    s.grant(0)  # one of a's starts: a waits for two now
    assert s.submit(ticket("a", "r2"))


@pytest.mark.parametrize(
    ("limits", "problem"),
    [
        (Limits(), None),
        (Limits(total=0), ("total", "must be at least 1")),
        (Limits(total=4, per_key=8), ("per_key", "must not exceed max_concurrent")),
        (Limits(per_key=2, per_request=4), ("per_request", "must not exceed max_per_key")),
        (Limits(queued_per_key=0), ("queued_per_key", "must be at least 1")),
    ],
)
def test_limits_are_checked(limits: Limits, problem: tuple[str, str] | None) -> None:
    assert limits.problem() == problem
