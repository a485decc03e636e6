"""Process entry helpers: uvloop, signal handling, graceful shutdown, one line to run a service."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import faulthandler
import gc
import signal
import sys
from collections.abc import Awaitable, Callable

from . import environment
from .config import ConfigError
from .preflight import PortInUse
from .tasks import stop_task


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
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(signal.SIGUSR1, dump_stacks)
            # A hangup never kills a service: its Reloader takes it over once started.
            loop.add_signal_handler(signal.SIGHUP, lambda: None)
        try:
            await main(stop)
        finally:
            await stop_leftovers()

    tune_gc()
    try:
        # Checked before anything connects: a bad prefix would otherwise surface only at the
        # first subject, after NATS, PostgreSQL and Redis were reached.
        environment.subject_prefix()
        asyncio.run(runner())
    except PortInUse as exc:
        print(f"ezat: cannot start: {exc}", file=sys.stderr)
        sys.exit(2)
    except ConfigError as exc:
        print(f"ezat: configuration error: {exc}", file=sys.stderr)
        sys.exit(2)
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        # A listener bound elsewhere than through ``preflight``: still one line, no traceback.
        print(
            f"ezat: cannot start: {exc.strerror or exc}; stop it or choose another port",
            file=sys.stderr,
        )
        sys.exit(2)


async def stop_leftovers() -> None:
    """The tasks still running once ``main`` returned, stopped with ``stop_task``: asyncio.run
    cancels them only once and then waits for them without a bound, so one that swallowed its
    cancellation would keep the process from exiting."""
    current = asyncio.current_task()
    left = [t for t in asyncio.all_tasks() if t is not current and not t.done()]
    await asyncio.gather(*(stop_task(t, grace=2.0) for t in left))


def dump_stacks() -> None:
    """SIGUSR1: where every thread and every asyncio task waits, on stderr (docs/reliability.md,
    "A process that does not stop"). Code locations only: no argument or local is printed."""
    out = sys.stderr
    print("ezat: stacks on SIGUSR1", file=out)
    faulthandler.dump_traceback(file=out, all_threads=True)
    for task in asyncio.all_tasks():
        print(f"task {task.get_name()}:", file=out)
        for line in awaiting(task.get_coro()):
            print(f"  {line}", file=out)
    out.flush()


def awaiting(coro: object) -> list[str]:
    """``file:line in function`` down the chain of what ``coro`` awaits (a task's own stack
    shows only its outermost frame while it is suspended)."""
    lines: list[str] = []
    while coro is not None and len(lines) < 40:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is None:
            lines.append(repr(coro)[:120])
            break
        lines.append(f"{frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}")
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return lines


def tune_gc() -> None:
    """Fewer, cheaper cyclic collections on the request path.

    Everything imported so far lives as long as the process: ``freeze`` moves it out of the
    collector's sight, so a full collection no longer walks every module, class and function.
    Requests allocate many short-lived containers; a larger first-generation threshold collects
    them in fewer passes (the profile showed young collections on every hop). Reference counting
    still frees acyclic garbage at once; only cycles wait a little longer.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_GEN0, GC_GEN1, GC_GEN2)


GC_GEN0, GC_GEN1, GC_GEN2 = 20_000, 20, 50
