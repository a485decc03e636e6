"""Fresh, migrated PostgreSQL databases for the tests, on the session's server."""

from __future__ import annotations

import uuid
from urllib.parse import urlsplit, urlunsplit

import asyncpg
from ezat_common import db


def with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


async def fresh_database(server_url: str, prefix: str = "ezat_test") -> str:
    """The URL of a new database on ``server_url``'s server, migrated."""
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    conn = await asyncpg.connect(server_url)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    url = with_database(server_url, name)
    conn = await asyncpg.connect(url)
    try:
        await db.migrate(conn)
    finally:
        await conn.close()
    return url
