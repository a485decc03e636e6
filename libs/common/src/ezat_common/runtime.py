"""Process entry helpers: uvloop, signal handling, graceful shutdown, one line to run a service."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import Awaitable, Callable

from .config import ConfigError


def run_service(main: Callable[[asyncio.Event], Awaitable[None]]) -> None:
    """Run ``main(stop)`` on uvloop; SIGTERM/SIGINT set ``stop`` so it can drain and return."""
    try:
        import uvloop

        uvloop.install()
    except ImportError:  # pragma: no cover - uvloop is a dependency; this keeps dev shells working
        pass

    async def runner() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, stop.set)
        await main(stop)

    try:
        asyncio.run(runner())
    except ConfigError as exc:
        print(f"ezat: configuration error: {exc}", file=sys.stderr)
        sys.exit(2)
