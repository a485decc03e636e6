"""A stack as ``ezat up`` runs it (cli/src/ezat_cli/stack.py), for the tests of one session:
the service and simulator processes of a config, under a subject prefix of their own (stacks
share the session's NATS server), supervised in the background, stopped after.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import asyncpg
from ezat_cli.infra import Infra, free_port
from ezat_cli.stack import Stack
from ezat_common import db

START_TIMEOUT = 90.0  # every process of a stack ready, on a loaded two-core machine


def free_ports(*names: str) -> dict[str, int]:
    """A free loopback port for each name."""
    return {name: free_port() for name in names}


@contextmanager
def running(
    config: Path,
    infra: Infra,
    prefix: str,
    *,
    env: dict[str, str] | None = None,
    service_env: dict[str, dict[str, str]] | None = None,
    then: Callable[[Stack], object] | None = None,
) -> Iterator[Stack]:
    """The stack of ``config`` (its folder is the stack's data folder) on ``infra``, ready and
    supervised. ``then`` adds to it (more replicas) before supervision starts; a stack that
    fails to start is stopped before the error is raised. ``infra.servers`` are stopped with it:
    pass the session's URLs without servers to keep them."""
    stack = Stack(
        config_path=config,
        data_dir=config.parent,
        infra=infra,
        extra_env={"EZAT_SUBJECT_PREFIX": prefix, **(env or {})},
        service_env=service_env or {},
    )
    try:
        stack.start(timeout=START_TIMEOUT)
        if then is not None:
            then(stack)
    except BaseException:
        stack.stop()
        raise
    stack.supervise_in_background()
    try:
        yield stack
    finally:
        stack.stop()


async def create_key(database_url: str, name: str, *, timeout: float = 60.0, **limits: Any) -> str:
    """The secret of a fresh API key called ``name`` (``limits``: ``rpm`` and the like)."""
    conn = await asyncpg.connect(database_url, timeout=timeout)
    try:
        _, secret = await db.create_key(conn, name, **limits)
    finally:
        await conn.close()
    return str(secret)


def key(database_url: str, name: str, **limits: Any) -> str:
    """``create_key`` outside an event loop (session fixtures)."""
    return asyncio.run(create_key(database_url, name, **limits))
