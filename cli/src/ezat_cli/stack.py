"""The whole stack as local processes: what `ezat up` runs and what the test suite drives.

Infrastructure (embedded or from URLs), schema migrations, the bundled simulators the config
declares, and the five services, each its own process as in the cluster. A service that dies is
restarted with backoff; ``stop()`` drains the edge first and leaves no process behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ezat_common import db
from ezat_common.config import Config, load_config

from . import infra as infra_mod

SERVICES = ("billing", "router", "fetcher", "translator", "edge")
MODULES = {
    "edge": "ezat_edge",
    "translator": "ezat_translator",
    "router": "ezat_router",
    "billing": "ezat_billing",
    "fetcher": "ezat_fetcher",
    "simulator": "ezat_simulator",
}
MAX_BACKOFF = 30.0


@dataclass
class Child:
    name: str
    args: list[str]
    env: dict[str, str]
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    backoff: float = 0.5
    next_start: float = 0.0
    supervised: bool = True

    def start(self) -> None:
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child owns it
        self.proc = subprocess.Popen(
            self.args, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


@dataclass
class Stack:
    config_path: Path
    data_dir: Path
    extra_env: dict[str, str] = field(default_factory=dict)
    infra: infra_mod.Infra | None = None
    children: dict[str, Child] = field(default_factory=dict)
    cfg: Config | None = None
    _stopping: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    @property
    def edge_url(self) -> str:
        assert self.cfg is not None
        host, _, port = self.cfg.edge.listen.rpartition(":")
        return f"http://{host}:{port}"

    def env(self) -> dict[str, str]:
        assert self.infra is not None
        env = {**os.environ, **self.infra.env(), **self.extra_env}
        env["EZAT_CONFIG"] = str(self.config_path.resolve())
        env.setdefault("PYTHONUNBUFFERED", "1")
        return env

    def start(self, timeout: float = 60.0) -> None:
        self.cfg = load_config(str(self.config_path))
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.data_dir / "logs").mkdir(exist_ok=True)
        if self.infra is None:
            self.infra = infra_mod.ensure(self.data_dir)
        self._write_state()
        asyncio.run(self._migrate())
        env = self.env()
        for sim in self.cfg.simulators:
            args = [sys.executable, "-m", MODULES["simulator"], "--config", str(self.config_path)]
            self._add(
                Child(f"sim-{sim.name}", [*args, "--name", sim.name], env, self._log(sim.name))
            )
        for svc in SERVICES:
            self._add(Child(svc, [sys.executable, "-m", MODULES[svc]], env, self._log(svc)))
        self.wait_ready(timeout)

    def add_service(
        self,
        name: str,
        module: str,
        env_overrides: dict[str, str] | None = None,
        args: Sequence[str] = (),
    ) -> Child:
        """Start one more supervised process after ``start()`` (e.g. a second router replica);
        ``module`` is a key of ``MODULES`` or a module name, ``args`` its command line."""
        env = {**self.env(), **(env_overrides or {})}
        command = [sys.executable, "-m", MODULES.get(module, module), *args]
        child = Child(name, command, env, self._log(name))
        self._add(child)
        return child

    def _log(self, name: str) -> Path:
        return self.data_dir / "logs" / f"{name}.log"

    def _add(self, child: Child) -> None:
        self.children[child.name] = child
        child.start()

    def _write_state(self) -> None:
        assert self.infra is not None
        state = {**self.infra.env(), "pid": os.getpid()}
        (self.data_dir / "infra.json").write_text(json.dumps(state))

    async def _migrate(self) -> None:
        assert self.infra is not None
        deadline = time.monotonic() + 30
        while True:
            try:
                os.environ.setdefault("DATABASE_URL", self.infra.database_url)
                conn = await db_connect(self.infra.database_url)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.3)
        try:
            await db.migrate(conn)
        finally:
            await conn.close()

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(self.edge_url + "/readyz", timeout=2) as resp:
                return bool(resp.status == 200)
        except OSError:
            return False

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.ready():
                return
            for child in self.children.values():
                if not child.alive:
                    tail = child.log_path.read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"{child.name} exited while starting:\n{tail}")
            time.sleep(0.2)
        raise TimeoutError(f"the stack was not ready after {timeout}s: see {self.data_dir}/logs")

    # ---- supervision ----------------------------------------------------------------------

    def supervise_once(self) -> None:
        now = time.monotonic()
        for child in self.children.values():
            if child.alive or not child.supervised:
                continue
            if child.next_start == 0.0:
                child.next_start = now + child.backoff
                child.backoff = min(child.backoff * 2, MAX_BACKOFF)
            elif now >= child.next_start:
                child.restarts += 1
                child.next_start = 0.0
                child.start()

    def supervise_in_background(self) -> None:
        def loop() -> None:
            while not self._stopping.wait(0.2):
                self.supervise_once()

        self._thread = threading.Thread(target=loop, name="ezat-supervisor", daemon=True)
        self._thread.start()

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Kill one process (fault tests); the supervisor restarts it if it is supervised."""
        child = self.children[name]
        if child.proc is not None and child.alive:
            child.proc.send_signal(sig)
            child.proc.wait(10)

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(5)
        # Edge first: it stops accepting and lets open streams finish.
        order = ["edge", "translator", "router", "fetcher", "billing"]
        order += [n for n in self.children if n not in order]
        for name in order:
            child = self.children.get(name)
            if child is not None and child.proc is not None:
                infra_mod.stop_process(child.proc, timeout=15)
        if self.infra is not None:
            self.infra.stop()
        with contextlib.suppress(FileNotFoundError):
            (self.data_dir / "infra.json").unlink()


async def db_connect(url: str) -> db.asyncpg.Connection:
    return await db.asyncpg.connect(url)


def saved_infra(data_dir: Path) -> dict[str, str]:
    """URLs that a running `ezat up` wrote, for CLI commands run beside it."""
    try:
        state = json.loads((data_dir / "infra.json").read_text())
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in state.items() if isinstance(v, str)}
