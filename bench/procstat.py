"""CPU seconds and resident memory of the stack's processes, read from ``/proc`` (Linux only).

A ``ProcGroup`` maps a name ("edge", "nats", "postgres", ...) to one or more pids; PostgreSQL is
a postmaster plus its backends, so a group also covers every descendant of its pids. ``snapshot``
returns ``{name: (cpu_seconds, rss_bytes)}`` (for such a multi-process group the memory is the
sum of PSS, so shared buffers are not counted once per backend); differences of two snapshots give
the CPU used in a phase. ``Sampler`` polls RSS in the background (an asyncio task) and keeps each
group's peak.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections import defaultdict
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _stat(pid: int) -> tuple[int, float, int] | None:
    """(ppid, cpu seconds, rss bytes) of one process, or None when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    # The command name may contain spaces and parentheses: split after the last ')'.
    fields = raw[raw.rindex(b")") + 2 :].split()
    ppid = int(fields[1])
    cpu = (int(fields[11]) + int(fields[12])) / _TICK  # utime + stime
    rss = int(fields[21]) * _PAGE
    return ppid, cpu, rss


def _pss(pid: int) -> int | None:
    """Proportional set size: shared pages divided among their sharers (sums correctly)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return None


def _children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = defaultdict(list)
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            info = _stat(int(entry))
            if info is not None:
                children[info[0]].append(int(entry))
    return children


class ProcGroup:
    """Named sets of root pids; each group counts its roots and all their descendants."""

    def __init__(self, roots: dict[str, list[int]], with_descendants: set[str] | None = None):
        self.roots = roots
        self.with_descendants = with_descendants or set()

    def pids(self) -> dict[str, list[int]]:
        if not self.with_descendants:
            return self.roots
        tree = _children_map()
        found: dict[str, list[int]] = {}
        for name, roots in self.roots.items():
            pids = list(roots)
            if name in self.with_descendants:
                todo = list(roots)
                while todo:
                    kids = tree.get(todo.pop(), [])
                    pids += kids
                    todo += kids
            found[name] = pids
        return found

    def snapshot(self) -> dict[str, tuple[float, int]]:
        """{group: (cpu seconds, rss bytes)} summed over the group's live processes."""
        out: dict[str, tuple[float, int]] = {}
        for name, pids in self.pids().items():
            cpu = 0.0
            rss = 0
            shared = name in self.with_descendants  # several processes: PSS, not RSS
            for pid in pids:
                info = _stat(pid)
                if info is not None:
                    cpu += info[1]
                    rss += (_pss(pid) or info[2]) if shared else info[2]
            out[name] = (cpu, rss)
        return out


def cpu_delta(
    before: dict[str, tuple[float, int]], after: dict[str, tuple[float, int]]
) -> dict[str, float]:
    return {name: round(after[name][0] - before.get(name, (0.0, 0))[0], 3) for name in after}


def rss_mb(snap: dict[str, tuple[float, int]]) -> dict[str, float]:
    return {name: round(rss / 2**20, 1) for name, (_, rss) in snap.items()}


class Sampler:
    """Polls RSS every ``interval`` seconds while running; ``peak`` holds each group's maximum
    and ``peak_total`` the largest simultaneous sum over ``total_of`` groups."""

    def __init__(self, group: ProcGroup, total_of: list[str], interval: float = 0.5) -> None:
        self.group = group
        self.total_of = total_of
        self.interval = interval
        self.peak: dict[str, float] = {}
        self.peak_total = 0.0
        self.samples = 0
        self._task: asyncio.Task[None] | None = None

    def sample(self) -> dict[str, float]:
        snap = rss_mb(self.group.snapshot())
        for name, mb in snap.items():
            self.peak[name] = max(self.peak.get(name, 0.0), mb)
        total = sum(snap.get(name, 0.0) for name in self.total_of)
        self.peak_total = max(self.peak_total, round(total, 1))
        self.samples += 1
        return snap

    async def _loop(self) -> None:
        while True:
            # /proc reads are cheap, but walking every pid for descendants is not: off the loop.
            await asyncio.to_thread(self.sample)
            await asyncio.sleep(self.interval)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
