"""`ezat up` as an operator runs it: the shipped config on free ports, the process started
with its own embedded servers, and the `export` lines it prints once it is up."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ezat_cli.infra import free_port

ROOT = Path(__file__).resolve().parents[2]
EZAT = str(Path(sys.executable).parent / "ezat")


@dataclass
class Up:
    config: Path
    exports: dict[str, str]  # what the printed `export` lines set
    env: dict[str, str]  # a shell's environment after pasting them (EZAT_DATA_DIR included)
    output: list[str]  # what it printed until then


def shipped_config_on_free_ports(path: Path) -> Path:
    """config/ezat.toml with every loopback port replaced by a free one (the same port, the same
    replacement: a simulator's listen and the deployments' base_url stay together)."""
    text = (ROOT / "config" / "ezat.toml").read_text()
    ports: dict[str, int] = {}

    def moved(m: re.Match[str]) -> str:
        return f"127.0.0.1:{ports.setdefault(m.group(1), free_port())}"

    path.write_text(re.sub(r"127\.0\.0\.1:(\d+)", moved, text))
    return path


def read_exports(proc: subprocess.Popen[str], timeout: float) -> tuple[dict[str, str], list[str]]:
    """The `export NAME=VALUE` lines `ezat up` prints once it is up (parsed as a shell would)."""
    exports: dict[str, str] = {}
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    while time.monotonic() < deadline and "EZAT_API_KEY" not in exports:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if line.strip().startswith("export "):
            name, _, value = shlex.split(line)[1].partition("=")
            exports[name] = value
    return exports, lines


@contextmanager
def ezat_up(folder: Path) -> Iterator[tuple[Up, subprocess.Popen[str]]]:
    """`ezat up` on the shipped config (ports moved) with data folder ``folder/data``; stopped
    with Ctrl-C's SIGINT at the end."""
    config = shipped_config_on_free_ports(folder / "ezat.toml")
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("NATS_URL", "DATABASE_URL", "REDIS_URL", "EZAT_URL", "EZAT_API_KEY")
    }
    env["EZAT_DATA_DIR"] = str(folder / "data")
    proc = subprocess.Popen(
        [EZAT, "up", "--config", str(config)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        exports, lines = read_exports(proc, 150)
        assert set(exports) == {"EZAT_URL", "EZAT_API_KEY"}, "".join(lines)
        yield Up(config, exports, {**env, **exports}, lines), proc
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
