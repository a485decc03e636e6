"""Nothing of an `ezat up` outlives it, even when it is killed outright (docs/reliability.md,
"When `ezat up` is killed").

``Stack`` records every process it starts (services, simulators, the embedded NATS, Redis and
PostgreSQL) in ``<data>/pids.json``: pid, start time and command line, so that a pid reused by
another program since is never taken for ours. Two things stop what it names:

- the watchdog (``python -m ezat_cli.reaper DATA_DIR``), a process `ezat up` starts first,
  reading a pipe only `ezat up` writes to. The pipe closes when `ezat up` exits, however it
  exits; a clean stop has removed ``pids.json`` by then, a SIGKILL has not, and the watchdog
  takes the data folder's lock and stops what it names;
- ``stop_recorded`` at the next `ezat up` (after its lock): whatever a killed watchdog left.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from .infra import Embedded
from .supervision import Child

PIDS_FILE = "pids.json"
# Seconds SIGTERMed processes get to drain and exit before SIGKILL.
GRACE = 10.0


@dataclass(frozen=True)
class Recorded:
    name: str
    pid: int
    started: str  # /proc/<pid>/stat's start time, in clock ticks since boot
    cmdline: str  # /proc/<pid>/cmdline's first argument: the program
    service: bool  # a service or simulator (stopped first), else an embedded server


def _proc(pid: int) -> tuple[str, str] | None:
    """(start time, program) of a live process, or None (gone, a zombie, no /proc)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    rest = stat[stat.rindex(b")") + 2 :].split()
    if rest[0] in (b"Z", b"X"):
        return None
    return rest[19].decode(), cmdline.split(b"\0")[0].decode(errors="replace")


def describe(name: str, pid: int, service: bool) -> Recorded | None:
    found = _proc(pid)
    if found is None:
        return None
    return Recorded(name, pid, found[0], found[1], service)


def is_ours(entry: Recorded) -> bool:
    """The recorded process still runs: same pid, same start time, same program."""
    return _proc(entry.pid) == (entry.started, entry.cmdline)


def record(data_dir: Path, entries: list[Recorded]) -> None:
    """Replace ``pids.json`` atomically (the watchdog may read it at any moment)."""
    tmp = data_dir / (PIDS_FILE + ".tmp")
    tmp.write_text(json.dumps([asdict(e) for e in entries]))
    tmp.replace(data_dir / PIDS_FILE)


def record_running(
    data_dir: Path,
    servers: Iterable[Embedded],
    children: Iterable[Child],
    last: set[tuple[str, int]],
) -> set[tuple[str, int]]:
    """Record the live processes of a stack when they are not ``last`` (what was recorded);
    returns what is recorded now."""
    running: list[tuple[str, int, bool]] = []
    for server in servers:
        if server.alive and server.pid is not None:
            running.append((server.name, server.pid, False))
    for child in children:
        procs = [*child.retired, *([child.proc] if child.proc is not None else [])]
        running += [(child.name, p.pid, True) for p in procs if p.poll() is None]
    now = {(name, pid) for name, pid, _ in running}
    if now != last:
        entries = [describe(*r) for r in running]
        record(data_dir, [e for e in entries if e is not None])
    return now


def recorded(data_dir: Path) -> list[Recorded]:
    try:
        raw = json.loads((data_dir / PIDS_FILE).read_text())
        return [Recorded(**item) for item in raw]
    except (OSError, ValueError, TypeError):
        return []


def forget(data_dir: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        (data_dir / PIDS_FILE).unlink()


def _signal(entry: Recorded, sig: int) -> None:
    """The process and, when it leads one (services run in sessions of their own, PostgreSQL's
    backends in its group), its process group."""
    with contextlib.suppress(OSError):
        if os.getpgid(entry.pid) == entry.pid:
            os.killpg(entry.pid, sig)
        else:
            os.kill(entry.pid, sig)


def _stop(entries: list[Recorded], grace: float) -> None:
    for entry in entries:
        _signal(entry, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while any(is_ours(e) for e in entries) and time.monotonic() < deadline:
        time.sleep(0.05)
    for entry in entries:
        if is_ours(entry):
            _signal(entry, signal.SIGKILL)


def stop_recorded(data_dir: Path, grace: float = GRACE) -> list[Recorded]:
    """Stop every process of ``pids.json`` that is still ours (services first, then the servers
    they use), forget the file; returns what was running. Call with the data folder locked."""
    alive = [e for e in recorded(data_dir) if is_ours(e)]
    _stop([e for e in alive if e.service], grace)
    _stop([e for e in alive if not e.service], grace)
    forget(data_dir)
    return alive


def start_watchdog(data_dir: Path, lock_file: Path) -> tuple[subprocess.Popen[bytes], int]:
    """The watchdog of this process, and the pipe's write end to keep open until exit."""
    read, write = os.pipe()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ezat_cli.reaper", str(data_dir), str(lock_file)],
        stdin=read,
        stdout=subprocess.DEVNULL,
        start_new_session=True,  # a Ctrl-C in the terminal is for `ezat up`, not for it
    )
    os.close(read)
    return proc, write


def watch(data_dir: Path, lock_file: Path) -> None:
    """Wait for `ezat up` to exit (EOF on stdin), then stop what it left, under its lock so
    that a new `ezat up` on the folder waits for the clean-up instead of racing it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while sys.stdin.buffer.read(4096):
        pass
    if not (data_dir / PIDS_FILE).exists():
        return  # a clean stop
    fd = os.open(lock_file, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()} reaper\n".encode(), 0)
    stopped = stop_recorded(data_dir)
    with contextlib.suppress(FileNotFoundError):
        (data_dir / "infra.json").unlink()
    if stopped:
        names = ", ".join(f"{e.name} (pid {e.pid})" for e in stopped)
        print(f"ezat: `ezat up` exited without stopping; stopped {names}", file=sys.stderr)
    os.close(fd)


if __name__ == "__main__":
    watch(Path(sys.argv[1]), Path(sys.argv[2]))
