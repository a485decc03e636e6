"""`ezat top`: the gateway on one terminal screen, for someone without Grafana at hand
(docs/observability.md, "`ezat top`"). Reads every service's /metrics once a second (the targets of
the config, or those given with ``--target``), and shows rates over the last ``--window``
seconds (top_view.py computes them).
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import time
from collections import deque

import aiohttp
from ezat_common.config import Config, local_url

from .top_view import Reading, render, view

CLEAR = "\x1b[H\x1b[2J"
READ_TIMEOUT = 0.8  # a target slower than this reads as not answering this second


SERVICES = ("translator", "router", "billing", "fetcher")  # the edge's /metrics is on `listen`
# What top shows from each service's own series.
SHOWS = {
    "translator": "whether it answers",
    "router": "the deployments' health and attempts",
    "billing": "tokens/s and $/min",
    "fetcher": "whether it answers",
}


def targets_of(cfg: Config) -> dict[str, str]:
    """name -> /metrics URL of every service the config gives an address to."""
    found = {"edge": local_url(cfg.edge.listen) + "/metrics"}
    for name in SERVICES:
        listen = getattr(cfg, name).metrics_listen
        if listen:
            found[name] = local_url(listen) + "/metrics"
    return found


def screen_width() -> int | None:
    """The terminal's width, to cut lines at (render names the columns it cut); None when the
    output is not a terminal (a pipe, a file): every column is printed whole."""
    return shutil.get_terminal_size().columns if sys.stdout.isatty() else None


def unread(cfg: Config, config: str) -> list[str]:
    """A line per service the config gives no ``metrics_listen``: top cannot read its series, and
    says so instead of showing an empty table."""
    return [
        f"ezat top: [{name}] has no metrics_listen in {config}, so top cannot show {SHOWS[name]}"
        for name in SERVICES
        if not getattr(cfg, name).metrics_listen
    ]


async def read(session: aiohttp.ClientSession, targets: dict[str, str]) -> Reading:
    async def one(url: str) -> str | None:
        try:
            async with session.get(url, timeout=aiohttp.ClientTimeout(total=READ_TIMEOUT)) as r:
                return await r.text() if r.status == 200 else None
        except (aiohttp.ClientError, TimeoutError, OSError):
            return None

    texts = await asyncio.gather(*(one(url) for url in targets.values()))
    reading = Reading(at=time.monotonic())
    for name, text in zip(targets, texts, strict=True):
        reading.add(name, text)
    return reading


async def run(targets: dict[str, str], *, interval: float, window: float, once: bool) -> None:
    readings: deque[Reading] = deque()
    async with aiohttp.ClientSession() as session:
        while True:
            readings.append(await read(session, targets))
            while readings[-1].at - readings[0].at > window and len(readings) > 2:
                readings.popleft()
            if len(readings) >= 2:
                lines = render(view(readings[0], readings[-1]), screen_width())
                if once:
                    print("\n".join(lines))
                    return
                sys.stdout.write(CLEAR + "\n".join(lines) + "\n")
                sys.stdout.flush()
            await asyncio.sleep(interval)
