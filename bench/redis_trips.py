"""What a budget hold costs in Redis: the commands the stack's processes send to Redis per
request, for a key with a budget and for one without, counted by Redis itself (MONITOR).

MONITOR shows each command a client sent, with the client's address, and each command a Lua
script ran, marked ``lua``: the script's inner commands are not counted (a script is one round
trip, whatever it runs). A client's port is mapped to the process that holds the socket (through
``/proc``), and an ``EVALSHA``'s script to its name by its SHA-1, so the result says which
process sent what, e.g. ``edge: EVALSHA hold-reserve``. A request's admission runs at most the
edge's ``hold-reserve`` (its own call: one round trip); its end, ``hold-shorten``; billing counts
stored rows with ``spend-count``, pipelined per batch (many commands, one round trip).

MONITOR slows Redis down, so this runs as a phase of its own, after the latency phases.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from ezat_common.spend_counter import COUNT
from ezat_edge.holds import RESERVE, SHORTEN
from redis import asyncio as aioredis


def _sha(script: str) -> str:
    return hashlib.sha1(script.encode()).hexdigest()


SCRIPTS = {_sha(RESERVE): "hold-reserve", _sha(SHORTEN): "hold-shorten", _sha(COUNT): "spend-count"}
ADMISSION = "edge: EVALSHA hold-reserve"  # the one command a hold adds to admission


def command_name(command: str) -> str:
    """``EVALSHA <sha> ...`` -> ``EVALSHA hold-reserve``; anything else: its upper-cased name."""
    words = command.split(" ", 2)
    name = words[0].upper()
    if name == "EVALSHA" and len(words) > 1:
        return f"{name} {SCRIPTS.get(words[1], words[1][:8])}"
    return name


def socket_owners(pids: Mapping[str, list[int]]) -> dict[int, str]:
    """{local TCP port: process name} of every socket the named processes hold (Linux /proc)."""
    inodes: dict[str, str] = {}
    for name, roots in pids.items():
        for pid in roots:
            with contextlib.suppress(OSError):
                for fd in os.listdir(f"/proc/{pid}/fd"):
                    with contextlib.suppress(OSError):
                        link = os.readlink(f"/proc/{pid}/fd/{fd}")
                        if link.startswith("socket:["):
                            inodes[link[8:-1]] = name
    ports: dict[int, str] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                owner = inodes.get(fields[9])
                if owner is not None:
                    ports[int(fields[1].rsplit(":", 1)[1], 16)] = owner
    return ports


async def count(
    redis_url: str,
    pids: Mapping[str, list[int]],
    send: Callable[[], Awaitable[int]],
    settle: Callable[[], Awaitable[None]],
) -> dict[str, Any]:
    """Run ``send()`` (it returns the requests that succeeded) and ``settle()`` under MONITOR:
    ``{"requests": n, "per_request": {"process: COMMAND": commands per request}}``."""
    seen: Counter[tuple[str, str]] = Counter()  # (client port, command name)
    redis = aioredis.from_url(redis_url)
    try:
        async with redis.monitor() as monitor:

            async def listen() -> None:
                async for entry in monitor.listen():
                    if entry["client_type"] != "lua":
                        seen[(entry["client_port"], command_name(entry["command"]))] += 1

            listener = asyncio.create_task(listen())
            try:
                ok = await send()
                await settle()
                await asyncio.sleep(0.5)  # the last commands reach the monitor
            finally:
                listener.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await listener
    finally:
        await redis.aclose()
    owners = socket_owners(pids)
    by: Counter[str] = Counter()
    for (port, name), n in seen.items():
        owner = owners.get(int(port), "other") if port.isdigit() else "other"
        by[f"{owner}: {name}"] += n
    per = {k: round(v / max(ok, 1), 3) for k, v in sorted(by.items())}
    return {"requests": ok, "per_request": per, "total_per_request": round(sum(per.values()), 3)}


def summary(plain: dict[str, Any], budget: dict[str, Any]) -> dict[str, Any]:
    """The budgeted key's commands per request beside the unbudgeted key's, and the difference."""
    names = sorted(set(plain["per_request"]) | set(budget["per_request"]))
    rows = {
        name: {
            "plain": plain["per_request"].get(name, 0.0),
            "budget": budget["per_request"].get(name, 0.0),
        }
        for name in names
    }
    for row in rows.values():
        row["added"] = round(row["budget"] - row["plain"], 3)
    edge_added = sum(row["added"] for name, row in rows.items() if name.startswith("edge:"))
    return {
        "requests": {"plain": plain["requests"], "budget": budget["requests"]},
        "commands": rows,
        "added_per_request": round(budget["total_per_request"] - plain["total_per_request"], 3),
        "edge_added_per_request": round(edge_added, 3),
        "admission_added_per_request": rows.get(ADMISSION, {}).get("added"),
    }
