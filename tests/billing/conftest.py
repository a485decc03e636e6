"""Fixtures of the billing tests: a pool on the session's fresh database, unique keys."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest
import pytest_asyncio


@pytest_asyncio.fixture(scope="session")
async def pool(database_url: str) -> AsyncIterator[asyncpg.Pool]:
    p = await asyncpg.create_pool(database_url, min_size=1, max_size=10)
    try:
        yield p
    finally:
        await p.close()


@pytest.fixture
def key_id() -> str:
    """A key of this test alone, so that tests sharing the database never see each other's rows."""
    return f"key_{uuid.uuid4().hex[:12]}"
