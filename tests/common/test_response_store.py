"""ezat_common.response_store against PostgreSQL: round trip, upsert, key scoping, expiry and
sweep, and the items a continuation rebuilds."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import msgspec
import pytest
from ezat_common import db, response_store
from ezat_common.response_store import StoredResponse, continuation

HISTORY = msgspec.json.encode([{"type": "message", "role": "user", "content": "hi"}])


@pytest.fixture
async def conn(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    c = await asyncpg.connect(database_url)
    await db.migrate(c)
    yield c
    await c.close()


def rid() -> str:
    return f"resp_{uuid.uuid4().hex}"


async def put(conn: Any, key: str, response_id: str, ttl: int = 60, text: str = "x") -> None:
    response = msgspec.json.encode({"id": response_id, "output_text": text})
    await response_store.put(
        conn, key_id=key, response_id=response_id, model="m", history=HISTORY,
        response=response, ttl=ttl, timeout=2.0,
    )  # fmt: skip


async def test_round_trip_and_upsert(conn: asyncpg.Connection) -> None:
    key, r = uuid.uuid4().hex, rid()
    await put(conn, key, r)
    await put(conn, key, r, text="second")
    got = await response_store.get(conn, key, r, timeout=2.0)
    assert got is not None
    assert (got.key_id, got.id, got.model, got.history) == (key, r, "m", HISTORY)
    assert msgspec.json.decode(got.response)["output_text"] == "second"
    assert got.expires_at - got.created_at == 60


async def test_another_key_sees_and_deletes_nothing(conn: asyncpg.Connection) -> None:
    key, r = uuid.uuid4().hex, rid()
    await put(conn, key, r)
    assert await response_store.get(conn, "someone-else", r) is None
    assert await response_store.delete(conn, "someone-else", r) is False
    assert await response_store.get(conn, key, r) is not None
    assert await response_store.delete(conn, key, r) is True
    assert await response_store.get(conn, key, r) is None
    assert await response_store.delete(conn, key, r) is False


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
    assert await response_store.sweep(conn) == 0
    assert await response_store.get(conn, key, live) is not None
    rows = await conn.fetch("SELECT 1 FROM stored_responses WHERE key_id = $1", key)
    assert len(rows) == 1


def stored(output: list[dict[str, Any]]) -> StoredResponse:
    response = msgspec.json.encode({"output": output})
    return StoredResponse(
        key_id="k", id="r", model="m", created_at=0, expires_at=1, history=HISTORY,
        response=response,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        (
            {"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
             "content": [{"type": "output_text", "text": "hello", "annotations": []}]},
            {"type": "message", "role": "assistant",
             "content": [{"type": "output_text", "text": "hello"}]},
        ),
        (
            {"type": "function_call", "id": "fc_1", "status": "completed", "call_id": "c1",
             "name": "f", "arguments": "{}"},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        ),
        (
            {"type": "function_call", "call_id": "c1", "name": "spawn", "arguments": "{}",
             "namespace": "ns"},
            {"type": "function_call", "call_id": "c1", "name": "spawn", "arguments": "{}",
             "namespace": "ns"},
        ),
        (
            {"type": "custom_tool_call", "call_id": "c2", "name": "patch", "input": "x",
             "status": "completed"},
            {"type": "custom_tool_call", "call_id": "c2", "name": "patch", "input": "x"},
        ),
        (
            {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "ezs1.abc"},
            {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "ezs1.abc"},
        ),
        ({"type": "reasoning", "id": "rs_2", "summary": []}, None),
        ({"type": "web_search_call", "id": "ws_1"}, None),
    ],
    ids=["message", "call", "namespaced_call", "custom_call", "reasoning", "unsealed", "other"],
)  # fmt: skip
def test_continuation_is_the_history_then_the_output_as_input(
    item: dict[str, Any], expected: dict[str, Any] | None
) -> None:
    user = {"type": "message", "role": "user", "content": "hi"}
    assert continuation(stored([item])) == [user, *([expected] if expected else [])]
