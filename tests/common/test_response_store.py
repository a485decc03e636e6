"""ezat_common.response_store against PostgreSQL: round trip, one write per id, key scoping,
the id's form, expiry and sweep, and a conversation read by walking its links, bounded."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import msgspec
import pytest
from ezat_common import db, response_store


@pytest.fixture
async def conn(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    c = await asyncpg.connect(database_url)
    await db.migrate(c)
    yield c
    await c.close()


def rid() -> str:
    return f"resp_{uuid.uuid4().hex}"


def turns(text: str) -> bytes:
    return msgspec.json.encode([{"role": "user", "content": [{"type": "text", "text": text}]}])


async def put(
    conn: Any,
    key: str,
    response_id: str,
    ttl: int = 60,
    text: str = "x",
    previous: str | None = None,
) -> None:
    response = msgspec.json.encode({"id": response_id, "output_text": text})
    await response_store.put(
        conn, key_id=key, response_id=response_id, previous_id=previous, model="m",
        turns=turns(text), response=response, ttl=ttl, timeout=2.0,
    )  # fmt: skip


async def test_round_trip_and_a_second_write_changes_nothing(conn: asyncpg.Connection) -> None:
    key, r = uuid.uuid4().hex, rid()
    await put(conn, key, r)
    await put(conn, key, r, text="second")
    got = await response_store.get(conn, key, r, timeout=2.0)
    assert got is not None
    assert (got.key_id, got.id, got.model) == (key, r, "m")
    assert msgspec.json.decode(got.response)["output_text"] == "x"
    assert got.expires_at - got.created_at == 60
    size = len(turns("x")) + len(got.response)
    assert await response_store.stored_bytes(conn, key) == size


async def test_another_key_sees_and_deletes_nothing(conn: asyncpg.Connection) -> None:
    key, r = uuid.uuid4().hex, rid()
    await put(conn, key, r)
    assert await response_store.get(conn, "someone-else", r) is None
    assert await response_store.delete(conn, "someone-else", r) is False
    assert await response_store.chain(conn, "someone-else", r, max_links=9, max_bytes=99) == []
    assert await response_store.get(conn, key, r) is not None
    assert await response_store.delete(conn, key, r) is True
    assert await response_store.get(conn, key, r) is None
    assert await response_store.delete(conn, key, r) is False


@pytest.mark.parametrize(
    "bad", ["resp_a\x00b", "resp_" + "a" * 129, "msg_abc", "resp_", "resp_a b", "resp_\u00e9"]
)
def test_only_well_formed_ids_are_looked_up(bad: str) -> None:
    assert not response_store.well_formed(bad)
    assert response_store.well_formed("resp_" + uuid.uuid4().hex)
    # Escaped characters take up to 6 (\\u00e9 is 2 to 6): the echo stays short.
    assert len(response_store.shown(bad * 100)) <= 6 * response_store.ID_SHOWN + 2


async def test_a_chain_is_walked_newest_first_and_bounded(conn: asyncpg.Connection) -> None:
    key = uuid.uuid4().hex
    ids = [rid() for _ in range(4)]
    for n, r in enumerate(ids):
        await put(conn, key, r, text=f"t{n}", previous=ids[n - 1] if n else None)
    whole = await response_store.chain(conn, key, ids[-1], max_links=10, max_bytes=10**6)
    assert [link.id for link in whole] == ids[::-1]
    assert whole[-1].previous_id is None
    assert whole[-1].total == 4 * len(turns("t0"))
    cut = await response_store.chain(conn, key, ids[-1], max_links=2, max_bytes=10**6)
    assert [link.id for link in cut] == ids[:1:-1] and cut[-1].previous_id == ids[1]
    small = await response_store.chain(conn, key, ids[-1], max_links=10, max_bytes=1)
    assert len(small) == 1 and small[0].total > 1


async def test_a_continued_response_is_hidden_on_delete_and_kept_until_its_last(
    conn: asyncpg.Connection,
) -> None:
    key, first, second = uuid.uuid4().hex, rid(), rid()
    await put(conn, key, first)
    await put(conn, key, second, previous=first, ttl=-1)
    assert await response_store.delete(conn, key, first) is True
    assert await response_store.get(conn, key, first) is None
    rows = await conn.fetch("SELECT id FROM stored_responses WHERE key_id = $1", key)
    assert {r["id"] for r in rows} == {first, second}
    # The sweep takes the expired end first, then the link it no longer needs.
    while await response_store.sweep(conn):
        pass
    assert await conn.fetch("SELECT id FROM stored_responses WHERE key_id = $1", key) == []


async def test_expired_responses_are_gone_and_swept(conn: asyncpg.Connection) -> None:
    key, live, dead = uuid.uuid4().hex, rid(), rid()
    await put(conn, key, live)
    for _ in range(3):
        await put(conn, key, rid(), ttl=-1)
    await put(conn, key, dead, ttl=-1)
    assert await response_store.get(conn, key, dead) is None
    assert await response_store.delete(conn, key, dead) is False
    assert await response_store.sweep(conn, limit=2) == 2
    assert await response_store.sweep(conn) >= 2
    while await response_store.sweep(conn):
        pass
    assert await response_store.get(conn, key, live) is not None
    rows = await conn.fetch("SELECT 1 FROM stored_responses WHERE key_id = $1", key)
    assert len(rows) == 1
