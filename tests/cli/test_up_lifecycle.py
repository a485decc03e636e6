"""`ezat up` owns its data folder (issue 27): a second one on the folder is refused with one line
and touches nothing; its key and operator token are kept (0600) and used again; killed outright
(SIGKILL) it leaves nothing running, through its watchdog, or, the watchdog killed too, through
the kernel's parent-death signal to its children and the next `ezat up`, which stops what is
left (the PostgreSQL postmaster) before starting. Real processes throughout, the anthropic SDK."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import anthropic
from ezat_cli import folder, reaper
from ezat_cli.infra import free_port
from ezat_cli.stack import saved_operator_token
from support.config import listen, one_simulator, write_config

EZAT = str(Path(sys.executable).parent / "ezat")
START = 150.0  # seconds for a whole stack on a loaded two-core machine


def processes_mentioning(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            blob = (entry / "cmdline").read_bytes() + (entry / "environ").read_bytes()
        except OSError:
            continue
        if marker.encode() in blob:
            found.append(int(entry.name))
    return found


def up(config: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [EZAT, "up", "--config", str(config)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def read_until_key(proc: subprocess.Popen[str]) -> tuple[str, str, str]:
    """(url, key, everything printed until its logs line) of a starting `ezat up`."""
    url = key = ""
    lines: list[str] = []
    deadline = time.monotonic() + START
    assert proc.stdout is not None
    while time.monotonic() < deadline and not (lines and "logs:" in lines[-1]):
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if line.strip().startswith("URL:"):
            url = line.split("URL:", 1)[1].strip()
        if line.strip().startswith("Key:"):
            key = line.split("Key:", 1)[1].strip()
    assert key.startswith("ezat_sk_"), "".join(lines)
    return url, key, "".join(lines)


async def ask(url: str, key: str) -> str:
    async with anthropic.AsyncAnthropic(base_url=url, api_key=key, max_retries=0) as client:
        msg = await client.messages.create(
            model="claude-sonnet-5-5",
            max_tokens=16,
            messages=[{"role": "user", "content": "hello [sim:tokens=3]"}],
        )
    return msg.stop_reason or ""


def watchdog_of(data: Path) -> int:
    found = [
        pid
        for pid in processes_mentioning(str(data))
        if b"ezat_cli.reaper" in Path(f"/proc/{pid}/cmdline").read_bytes()
    ]
    assert len(found) == 1, found
    return found[0]


def mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


async def until_gone(marker: str, seconds: float) -> list[int]:
    left: list[int] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        left = processes_mentioning(marker)
        if not left:
            break
        await asyncio.sleep(0.2)
    return left


async def test_one_up_per_folder_kept_key_and_nothing_left_after_sigkill(tmp_path: Path) -> None:
    sim = free_port()
    sections = one_simulator(free_port(), sim, simulators=[{"name": "sim", "listen": listen(sim)}])
    config = write_config(tmp_path / "up.toml", **sections)
    data = tmp_path / "data"
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("NATS_URL", "DATABASE_URL", "REDIS_URL", "EZAT_OPERATOR_TOKEN")
    }
    env["EZAT_DATA_DIR"] = str(data)
    first = up(config, env)
    try:
        url, key, printed = await asyncio.to_thread(read_until_key, first)
        assert await ask(url, key) == "end_turn"

        # The key and the operator token are kept, readable by their owner alone.
        token = saved_operator_token(data)
        assert token and f"Operator token (GET /api/status): {token}" in printed
        assert mode(data / folder.OPERATOR_TOKEN_FILE) == 0o600
        assert (data / folder.UP_KEY_FILE).read_text().strip() == key
        assert mode(data / folder.UP_KEY_FILE) == 0o600
        state = (data / "infra.json").read_bytes()
        assert json.loads(state)["EZAT_URL"] == url
        pids = (data / reaper.PIDS_FILE).read_bytes()

        # A second `ezat up` on the folder: one line, and the first one's files untouched.
        second = await asyncio.to_thread(
            subprocess.run, [EZAT, "up", "--config", str(config)], env=env,
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert second.returncode == 1
        assert second.stderr.strip() == (
            f"ezat: another ezat up (pid {first.pid}) is running with data folder {data}"
        ), second.stderr
        assert (data / "infra.json").read_bytes() == state
        assert (data / reaper.PIDS_FILE).read_bytes() == pids

        # The watchdog killed first, then `ezat up` itself: its children get the kernel's
        # SIGTERM (PR_SET_PDEATHSIG) and stop; PostgreSQL, detached by pg_ctl, runs on...
        recorded = reaper.recorded(data)
        names = {e.name for e in recorded}
        assert {"edge", "router", "translator", "billing", "fetcher", "sim-sim"} <= names
        assert {"nats", "redis", "postgres"} <= names
        os.kill(watchdog_of(data), signal.SIGKILL)
        first.kill()
        first.wait(10)
        children = [e for e in recorded if e.name != "postgres"]
        deadline = time.monotonic() + 30
        while any(reaper.is_ours(e) for e in children) and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        assert not [e for e in children if reaper.is_ours(e)]
        orphan = [e for e in recorded if e.name == "postgres"]
        assert orphan and reaper.is_ours(orphan[0]), "pg_ctl's postmaster outlives `ezat up`"
    finally:
        if first.poll() is None:
            first.kill()
            first.wait(10)

    # ...until the next `ezat up` on the folder stops it, then starts, with the same key.
    third = up(config, env)
    try:
        url3, key3, printed3 = await asyncio.to_thread(read_until_key, third)
        assert "stopped what a killed ezat up left running" in printed3, printed3
        assert not any(reaper.is_ours(e) for e in recorded)
        assert key3 == key and "the same key as the last start" in printed3
        assert saved_operator_token(data) == token
        assert await ask(url3, key3) == "end_turn"
        # Killed outright with its watchdog alive: nothing of it is left a few seconds later.
        running = reaper.recorded(data)
        third.kill()
        third.wait(10)
        left = await until_gone(str(tmp_path), 40)
        assert left == [], f"processes left behind: {left}"
        assert not any(reaper.is_ours(e) for e in running)
    finally:
        if third.poll() is None:
            third.kill()
            third.wait(10)
        for e in reaper.recorded(data):  # a failed run leaves no process behind either
            if reaper.is_ours(e):
                os.kill(e.pid, signal.SIGKILL)
