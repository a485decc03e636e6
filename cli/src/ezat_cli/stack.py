"""The whole stack as local processes: what `ezat up` runs and what the test suite drives.

Infrastructure (embedded or from URLs), schema migrations, the bundled simulators the config
declares, and the five services, each its own process as in the cluster. A service that dies is
restarted with backoff, and so is an embedded NATS, PostgreSQL or Redis (same port or socket,
same data); a backoff goes back to its first step once the process has stayed up ``healthy_after``
seconds. ``restart(name)`` is a rolling restart: the replacement starts as soon as the old
process announces that it takes no new work (``ezat_common.lifecycle``), while the old one
drains. ``stop()`` drains the edge first and leaves no process behind (docs/reliability.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import signal
import socket
import sys
import threading
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
from ezat_common import db, environment, lifecycle, seal_keys
from ezat_common.config import Config, load_config, local_url, split_listen

from . import infra as infra_mod
from . import reaper
from .folder import saved_infra as saved_infra
from .folder import saved_operator_token as saved_operator_token
from .rolling import announces, start_warm, wait_replacement
from .supervision import HEALTHY_AFTER, Child, Rollover, Supervised, supervise

SERVICES = ("billing", "router", "fetcher", "translator", "edge")
MODULES = {
    "edge": "ezat_edge",
    "translator": "ezat_translator",
    "router": "ezat_router",
    "billing": "ezat_billing",
    "fetcher": "ezat_fetcher",
    "simulator": "ezat_simulator",
}


@dataclass
class Stack:
    config_path: Path
    data_dir: Path
    extra_env: dict[str, str] = field(default_factory=dict)
    # Per service, on top of ``extra_env``: e.g. each service's own NATS user in NATS_URL.
    service_env: dict[str, dict[str, str]] = field(default_factory=dict)
    infra: infra_mod.Infra | None = None
    children: dict[str, Child] = field(default_factory=dict)
    cfg: Config | None = None
    healthy_after: float = HEALTHY_AFTER
    _stopping: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    # The supervisor thread and ``restart`` both start processes: one at a time.
    _lock: threading.RLock = field(default_factory=threading.RLock)
    _edge_socket: socket.socket | None = None
    # The edges' EZAT_OPERATOR_TOKEN when neither the environment nor ``extra_env`` gives one:
    # the stack reads its own /api/status with it.
    _operator_token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    # (name, pid) of every process last written to ``pids.json`` (``reaper``).
    _recorded: set[tuple[str, int]] = field(default_factory=set)
    # Every process started gets the kernel's SIGTERM when the starting thread dies: only for a
    # stack whose processes are all started from one lasting thread (`ezat up`'s main thread).
    die_with_parent: bool = False

    @property
    def operator_token(self) -> str:
        given = self.extra_env.get(environment.OPERATOR_TOKEN) or environment.operator_token()
        return given or self._operator_token

    @property
    def edge_url(self) -> str:
        assert self.cfg is not None
        return local_url(self.cfg.edge.listen)

    def env(self) -> dict[str, str]:
        assert self.infra is not None
        env = {**os.environ, **self.infra.env(), **self.extra_env}
        env["EZAT_CONFIG"] = str(self.config_path.resolve())
        env[environment.OPERATOR_TOKEN] = self.operator_token
        env[environment.DRAIN_DIR] = str(self.drain_dir)
        if not env.get(environment.SEAL_KEYS):
            # Every translator of the stack, restarted or not, opens what another one sealed.
            env[environment.SEAL_KEYS] = seal_keys.kept_locally(self.data_dir)
        env.setdefault("PYTHONUNBUFFERED", "1")
        return env

    @property
    def drain_dir(self) -> Path:
        """Where services announce that they stopped taking work (``<pid>.draining``)."""
        return self.data_dir / "drain"

    def start(self, timeout: float = 60.0) -> None:
        self.cfg = load_config(str(self.config_path))
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.data_dir / "logs").mkdir(exist_ok=True)
        self.drain_dir.mkdir(exist_ok=True)
        if self.infra is None:
            self.infra = infra_mod.ensure(self.data_dir, die_with_parent=self.die_with_parent)
        self._record_pids()
        self._write_state()
        asyncio.run(self._migrate())
        env = self.env()
        for sim in self.cfg.simulators:
            args = [sys.executable, "-m", MODULES["simulator"], "--config", str(self.config_path)]
            self._add(
                Child(f"sim-{sim.name}", [*args, "--name", sim.name], env, self._log(sim.name))
            )
        for svc in SERVICES:
            own = {**env, **self.service_env.get(svc, {})}
            child = Child(svc, [sys.executable, "-m", MODULES[svc]], own, self._log(svc))
            if svc == "edge":
                self._share_edge_socket(child)
            self._add(child)
        self.wait_ready(timeout)

    def _share_edge_socket(self, child: Child) -> None:
        """Bind the edge's address here, once, and hand the socket to every edge started: a
        restarted edge finds the connections that arrived meanwhile waiting in its accept queue
        (none refused), and ``restart`` can start the replacement beside the old edge."""
        assert self.cfg is not None
        host, port = split_listen(self.cfg.edge.listen)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._edge_socket = socket.create_server((host, port), family=family, backlog=1024)
        fd = self._edge_socket.fileno()
        child.env = {**child.env, environment.EDGE_LISTEN_FD: str(fd)}
        child.pass_fds = (fd,)

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
        child.die_with_parent = self.die_with_parent
        self.children[child.name] = child
        child.start()
        self._record_pids()

    def _record_pids(self) -> None:
        """Every process of the stack now, in ``pids.json`` (``reaper``), when that changed;
        from ``start()`` on (before it there is no folder of the stack's to write in)."""
        if self.cfg is None:
            return
        servers = self.infra.servers if self.infra is not None else []
        with self._lock:  # one writer at a time: the supervisor thread and ``add_service``
            try:
                self._recorded = reaper.record_running(
                    self.data_dir, servers, list(self.children.values()), self._recorded
                )
            except OSError as exc:  # the watchdog then misses a pid: said, never fatal
                print(f"ezat: could not record the stack's pids: {exc}", file=sys.stderr)

    def _write_state(self) -> None:
        assert self.infra is not None
        # EZAT_URL: where CLI commands run beside `ezat up` find the edge (its admin API).
        state = {**self.infra.env(), "EZAT_URL": self.edge_url, "pid": os.getpid()}
        (self.data_dir / "infra.json").write_text(json.dumps(state))

    async def _migrate(self) -> None:
        assert self.infra is not None
        deadline = time.monotonic() + 30
        while True:
            try:
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
        """Every service has a ready replica: the edge's /api/status answers 200 (an edge's
        /readyz answers for that edge alone)."""
        status = urllib.request.Request(
            self.edge_url + "/api/status",
            headers={"Authorization": f"Bearer {self.operator_token}"},
        )
        try:
            with urllib.request.urlopen(status, timeout=5) as resp:
                return bool(resp.status == 200)
        except OSError:  # urllib's HTTPError (a 503: not yet) is one
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

    def supervise_once(self, now: float | None = None) -> None:
        """Restart what died: the embedded servers first (services need them), then services."""
        with self._lock:
            if self._stopping.is_set():  # stop() is taking everything down: restart nothing
                return
            for unit in self.units():
                t = time.monotonic() if now is None else now
                try:
                    if supervise(unit, t, self.healthy_after):
                        print(f"ezat: restarted {unit.name} (restart {unit.restarts})", flush=True)
                except Exception as exc:  # e.g. a server that did not come up: try again later
                    unit.next_start = 0.0
                    print(f"ezat: could not restart {unit.name}: {exc}", file=sys.stderr)
            for child in self.children.values():
                child.retired = [p for p in child.retired if p.poll() is None]
                if child.supervised and self._announced_drain(child):
                    self._replace(child)
            self._record_pids()

    def _announced_drain(self, child: Child) -> bool:
        """The child's process was told to stop (by someone else than ``restart``) and took
        no new work since: its replacement need not wait for it to exit."""
        if child.proc is None or not child.alive:
            return False
        mark = lifecycle.marker(child.proc.pid, self.drain_dir)
        return mark is not None and mark.exists()

    def _replace(self, child: Child) -> None:
        assert child.proc is not None
        old = child.proc
        child.retired.append(old)
        child.start()
        child.next_start = 0.0
        with contextlib.suppress(FileNotFoundError):
            mark = lifecycle.marker(old.pid, self.drain_dir)
            assert mark is not None
            mark.unlink()
        print(f"ezat: {child.name} is draining; started its replacement", flush=True)

    def units(self) -> list[Supervised]:
        servers: list[Supervised] = list(self.infra.servers) if self.infra is not None else []
        return [*servers, *self.children.values()]

    def supervise_in_background(self) -> None:
        def loop() -> None:
            while not self._stopping.wait(0.2):
                self.supervise_once()

        self._thread = threading.Thread(target=loop, name="ezat-supervisor", daemon=True)
        self._thread.start()

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Kill one process (fault tests); the supervisor restarts it if it is supervised."""
        proc = self.children[name].proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(sig)
            proc.wait(10)  # this process: a SIGTERMed one may be replaced before it exits

    def restart(self, name: str, timeout: float = 30.0, wait_ready: bool = True) -> Rollover:
        """Rolling restart of one service: its replacement takes work as soon as the old process
        announces that it takes no new work, and the old one goes on draining what it holds.

        A service that announces (``rolling.ANNOUNCING``) gets its replacement started first,
        warm and waiting (``lifecycle.wait_turn``), then the old one gets SIGTERM. The edge, on
        the socket the stack shares with it, gets its replacement started and accepting first,
        beside the old one. Others are replaced once the old process has exited. With
        ``wait_ready`` it returns once the replacement takes work."""
        with self._lock:
            child = self.children[name]
            old = child.proc
            if old is None or old.poll() is not None:
                raise RuntimeError(f"{name} is not running")
            mark = lifecycle.marker(old.pid, self.drain_dir)
            assert mark is not None
            early, beside = announces(child), bool(child.pass_fds)
            if early or beside:
                start_warm(child, old, "waiting" if early else "ready", timeout, self.drain_dir)
            signalled = time.monotonic()
            old.send_signal(signal.SIGTERM)
            while not ((early or beside) and mark.exists()) and old.poll() is None:
                if time.monotonic() > signalled + timeout:
                    raise TimeoutError(f"{name} did not stop taking work in {timeout}s")
                time.sleep(0.005)
            rollover = Rollover(stopped_taking=time.monotonic() - signalled)
            if not (early or beside):
                child.start()
            if old.poll() is None:
                child.retired.append(old)
            child.next_start = 0.0
            self._record_pids()
        if beside:
            rollover.replacement_ready = 0.0  # it was accepting before the old one was told
        elif wait_ready:
            wait_replacement(child, timeout, self.drain_dir, self.ready)
            rollover.replacement_ready = time.monotonic() - signalled
        with contextlib.suppress(FileNotFoundError):
            mark.unlink()
        return rollover

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(5)
        # Edge first: it stops accepting and lets open streams finish.
        order = ["edge", "translator", "router", "fetcher", "billing"]
        order += [n for n in self.children if n not in order]
        for name in order:
            child = self.children.get(name)
            if child is None:
                continue
            for proc in [*child.retired, *([child.proc] if child.proc is not None else [])]:
                infra_mod.stop_process(proc, timeout=self._stop_timeout())
            child.retired.clear()
        if self._edge_socket is not None:
            self._edge_socket.close()
            self._edge_socket = None
        if self.infra is not None:
            self.infra.stop()
        with contextlib.suppress(FileNotFoundError):
            (self.data_dir / "infra.json").unlink()
        reaper.forget(self.data_dir)  # a clean stop: nothing for the watchdog to do
        self._recorded = set()

    def _stop_timeout(self) -> float:
        # A SIGTERMed service may take the whole drain deadline; a little more, then SIGKILL.
        drain = self.cfg.shutdown.drain_timeout if self.cfg is not None else 30.0
        return drain + 5.0


async def db_connect(url: str) -> asyncpg.Connection:
    return await asyncpg.connect(url)
