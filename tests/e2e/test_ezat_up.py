"""`ezat up` from nothing: embedded NATS/PostgreSQL/Redis, five services, simulators, a printed
URL and key that stream token by token to the anthropic SDK; Ctrl-C leaves no process behind."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import anthropic
from support.stack import free_ports

from .conftest import PORTS, e2e_config


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


def read_until_key(proc: subprocess.Popen[str], timeout: float) -> tuple[str, str, list[str]]:
    url = key = ""
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    while time.monotonic() < deadline and not key:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if line.strip().startswith("URL:"):
            url = line.split("URL:", 1)[1].strip()
        if line.strip().startswith("Key:"):
            key = line.split("Key:", 1)[1].strip()
    return url, key, lines


async def test_ezat_up_serves_streams_and_stops_cleanly(tmp_path: Path) -> None:
    ports = free_ports(*PORTS)
    config = e2e_config(tmp_path / "up.toml", ports)
    env = {
        k: v for k, v in os.environ.items() if k not in ("NATS_URL", "DATABASE_URL", "REDIS_URL")
    }
    env["EZAT_DATA_DIR"] = str(tmp_path / "data")
    ezat = str(Path(sys.executable).parent / "ezat")
    proc = subprocess.Popen(
        [ezat, "up", "--config", str(config)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        url, key, lines = await asyncio.to_thread(read_until_key, proc, 150)
        assert key.startswith("ezat_sk_"), "".join(lines)
        assert url == f"http://127.0.0.1:{ports['edge']}"

        async with anthropic.AsyncAnthropic(base_url=url, api_key=key, max_retries=0) as client:
            arrivals: list[float] = []
            async with client.messages.stream(
                model="claude-sonnet-5-5",
                max_tokens=64,
                messages=[
                    {"role": "user", "content": "stream please [sim:tokens=6] [sim:token_ms=50]"}
                ],
            ) as stream:
                async for event in stream:
                    if event.type == "content_block_delta":
                        arrivals.append(time.monotonic())
        assert len(arrivals) == 6
        # Token by token: the deltas are spread out in time, not delivered in one burst.
        assert arrivals[-1] - arrivals[0] > 0.15
        assert processes_mentioning(str(tmp_path))
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            rest, _ = await asyncio.to_thread(proc.communicate, None, 60)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    assert proc.returncode == 0, rest
    leftovers: list[int] = []
    for _ in range(50):
        leftovers = processes_mentioning(str(tmp_path))
        if not leftovers:
            break
        await asyncio.sleep(0.2)
    assert leftovers == [], f"processes left behind: {leftovers}"
