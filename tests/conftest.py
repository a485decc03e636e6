"""Session-wide infrastructure for the suite: real NATS, PostgreSQL and Redis processes.

URLs from ``NATS_URL``/``DATABASE_URL``/``REDIS_URL`` are used where set; otherwise the embedded
servers of ``ezat_cli.infra`` start once per session. ``database_url`` is a fresh, migrated
database so that tests never see rows of another run.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from ezat_cli import infra as infra_mod
from support.clients import close_clients
from support.databases import fresh_database


@pytest.fixture(scope="session")
def data_dir() -> Iterator[Path]:
    """The session's folder (stacks' logs included); ``EZAT_KEEP_TEST_DATA=1`` keeps it after the
    run, to read the logs of a failure (the path is printed)."""
    if os.environ.get("EZAT_KEEP_TEST_DATA") == "1":
        folder = tempfile.mkdtemp(prefix="ezat-test-")
        print(f"\ntest data kept in {folder}")
        yield Path(folder)
        return
    with tempfile.TemporaryDirectory(prefix="ezat-test-") as folder:
        yield Path(folder)


@pytest.fixture(scope="session")
def infra(data_dir: Path) -> Iterator[infra_mod.Infra]:
    started = infra_mod.ensure(data_dir)
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture(scope="session")
def nats_url(infra: infra_mod.Infra) -> str:
    return infra.nats_url


@pytest.fixture(scope="session")
def redis_url(infra: infra_mod.Infra) -> str:
    return infra.redis_url


@pytest.fixture(scope="session")
def database_url(infra: infra_mod.Infra) -> str:
    return asyncio.run(fresh_database(infra.database_url))


@pytest.fixture(scope="session", autouse=True)
def _no_ambient_config() -> None:
    # Services under test get their config explicitly; a developer's EZAT_CONFIG must not leak in.
    os.environ.pop("EZAT_CONFIG", None)


@pytest.fixture(autouse=True)
async def _closes_clients() -> AsyncIterator[None]:
    """Every client a test left to ``support.clients`` is closed when it ends (see there why)."""
    yield
    await close_clients()
