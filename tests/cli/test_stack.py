"""The supervisor's restart rule (``Stack.supervise_once``): backoff doubling, its reset after a
healthy period, and embedded servers supervised like services. Pure (time injected), then one
test with real processes."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ezat_cli.infra import Infra
from ezat_cli.stack import Stack
from ezat_cli.supervision import HEALTHY_AFTER, MAX_BACKOFF, Child


@dataclass
class FakeChild(Child):
    """A child whose process is a flag: ``die()`` kills it, ``start()`` revives it."""

    up: bool = True
    starts: int = 0

    def start(self) -> None:
        self.up = True
        self.starts += 1

    @property
    def alive(self) -> bool:
        return self.up

    def die(self) -> None:
        self.up = False


def fake(name: str = "router") -> FakeChild:
    return FakeChild(name, [], {}, Path("/dev/null"))


def stack_with(*children: Child) -> Stack:
    stack = Stack(config_path=Path("unused.toml"), data_dir=Path("unused"))
    stack.children = {c.name: c for c in children}
    return stack


def crash_and_restart(stack: Stack, child: FakeChild, now: float) -> float:
    """Kill the child at ``now``, tick until it is restarted; returns the restart time."""
    child.die()
    stack.supervise_once(now=now)
    due = child.next_start
    assert due > now
    stack.supervise_once(now=due - 0.01)
    assert not child.alive, "restarted before its backoff"
    stack.supervise_once(now=due)
    assert child.alive
    return due


def test_backoff_doubles_while_crashes_follow_each_other() -> None:
    child = fake()
    stack = stack_with(child)
    now, delays = 100.0, []
    for _ in range(8):
        restarted = crash_and_restart(stack, child, now)
        delays.append(round(restarted - now, 3))
        now = restarted + 0.1  # dies again 0.1 s after each start
    assert delays == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, MAX_BACKOFF, MAX_BACKOFF]
    assert child.restarts == 8


def test_backoff_resets_after_a_healthy_period() -> None:
    child = fake()
    stack = stack_with(child)
    now = 100.0
    for _ in range(6):  # six quick crashes: the next delay would be 30 s
        now = crash_and_restart(stack, child, now) + 0.1
    assert child.backoff == MAX_BACKOFF
    # Up for a while, but not yet healthy_after: the backoff stays.
    stack.supervise_once(now=child.started_at + HEALTHY_AFTER - 0.5)
    assert child.backoff == MAX_BACKOFF
    stack.supervise_once(now=child.started_at + HEALTHY_AFTER)
    assert child.backoff == 0.5
    now = child.started_at + HEALTHY_AFTER + 1
    assert crash_and_restart(stack, child, now) - now == 0.5


def test_unsupervised_children_stay_dead() -> None:
    child = fake()
    child.supervised = False
    stack = stack_with(child)
    child.die()
    for t in range(100, 200, 5):
        stack.supervise_once(now=float(t))
    assert not child.alive and child.starts == 0


def test_embedded_servers_are_supervised_and_urls_are_not() -> None:
    # A server given by URL: Infra has no server object for it, nothing to restart.
    stack = stack_with()
    stack.infra = Infra("nats://elsewhere:4222", "postgresql://elsewhere/db", "redis://elsewhere")
    assert stack.units() == []
    server = fake("nats")
    stack.infra.servers.append(server)  # type: ignore[arg-type]
    assert stack.units() == [server]
    crash_and_restart(stack, server, 50.0)
    assert server.restarts == 1


CRASHER = """
import os, sys, time
flag = sys.argv[1]
n = int(open(flag).read()) if os.path.exists(flag) else 0
if n > 0:
    open(flag, "w").write(str(n - 1))
    sys.exit(1)
time.sleep(60)
"""


def test_real_process_backoff_resets_after_healthy_period(tmp_path: Path) -> None:
    flag = tmp_path / "crashes"
    flag.write_text("4")  # the first four starts crash at once
    child = Child(
        "crasher",
        [sys.executable, "-c", CRASHER, str(flag)],
        {},
        tmp_path / "crasher.log",
        initial_backoff=0.1,
        backoff=0.1,
    )
    stack = stack_with(child)
    stack.healthy_after = 1.0
    child.start()
    try:
        deadline = time.monotonic() + 15
        while child.restarts < 4 or not child.alive:
            assert time.monotonic() < deadline, f"restarts={child.restarts}"
            stack.supervise_once()
            time.sleep(0.02)
        assert child.backoff == 1.6  # 0.1, 0.2, 0.4, 0.8 used up
        up_since = time.monotonic()
        while child.backoff != 0.1:
            assert time.monotonic() - up_since < 3, "the backoff was not reset"
            stack.supervise_once()
            time.sleep(0.02)
        assert child.alive
        assert child.proc is not None
        child.proc.kill()
        child.proc.wait()
        killed = time.monotonic()
        while not child.alive:
            stack.supervise_once()
            time.sleep(0.02)
        assert time.monotonic() - killed < 0.5  # restarted after 0.1 s again, not 1.6 s
    finally:
        if child.proc is not None:
            child.proc.kill()
            child.proc.wait()
