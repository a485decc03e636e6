"""Stored Responses API responses (``store: true``) in PostgreSQL: kept 30 days, scoped to the
API key that created them (docs/responses.md, "Stored responses").

The translator writes a response before its client gets it (a ``previous_response_id`` may
follow at once) and reads the conversation a continuation names; the edge answers GET and
DELETE. Every query names the key id: another key's response does not exist for it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import msgspec

TTL_SECONDS = 30 * 86400
# Why a response is not there, whoever asks (GET, DELETE, previous_response_id): one sentence.
GONE = "it was not stored (store: false), was deleted, or expired (responses are kept 30 days)"
# What a caller waits for at most, per operation, and what it means the store cannot answer now.
TIMEOUT = 2.0
UNAVAILABLE = (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, asyncio.TimeoutError)

_decode_items = msgspec.json.Decoder(list[dict[str, Any]]).decode
_decode_object = msgspec.json.Decoder(dict[str, Any]).decode


class StoredResponse(msgspec.Struct, frozen=True, kw_only=True):
    key_id: str
    id: str
    model: str
    created_at: int  # unix seconds
    expires_at: int
    history: bytes  # JSON: the input items of the conversation up to this turn
    response: bytes  # JSON: the response object, as sent


async def put(
    db: Any,
    *,
    key_id: str,
    response_id: str,
    model: str,
    history: bytes,
    response: bytes,
    ttl: int = TTL_SECONDS,
    timeout: float | None = None,
) -> None:
    """Keep (or replace) a response; ``db`` is an asyncpg pool or connection."""
    await db.execute(
        "INSERT INTO stored_responses (key_id, id, model, expires_at, history, response)"
        " VALUES ($1, $2, $3, now() + make_interval(secs => $4), $5, $6)"
        " ON CONFLICT (key_id, id) DO UPDATE SET model = excluded.model,"
        " expires_at = excluded.expires_at, history = excluded.history,"
        " response = excluded.response",
        key_id,
        response_id,
        model,
        float(ttl),
        history,
        response,
        timeout=timeout,
    )


async def get(
    db: Any, key_id: str, response_id: str, *, timeout: float | None = None
) -> StoredResponse | None:
    """The live response ``response_id`` of ``key_id``; None if missing, expired or another's."""
    row = await db.fetchrow(
        "SELECT key_id, id, model, extract(epoch FROM created_at)::bigint AS created_at,"
        " extract(epoch FROM expires_at)::bigint AS expires_at, history, response"
        " FROM stored_responses WHERE key_id = $1 AND id = $2 AND expires_at > now()",
        key_id,
        response_id,
        timeout=timeout,
    )
    return None if row is None else StoredResponse(**dict(row))


async def delete(db: Any, key_id: str, response_id: str, *, timeout: float | None = None) -> bool:
    """True if a live response of ``key_id`` was deleted."""
    status = await db.execute(
        "DELETE FROM stored_responses WHERE key_id = $1 AND id = $2 AND expires_at > now()",
        key_id,
        response_id,
        timeout=timeout,
    )
    return bool(status != "DELETE 0")


async def sweep(db: Any, limit: int = 1000) -> int:
    """Delete up to ``limit`` expired responses (a batch: no long lock); how many went."""
    status = await db.execute(
        "DELETE FROM stored_responses WHERE ctid IN (SELECT ctid FROM stored_responses"
        " WHERE expires_at <= now() LIMIT $1)",
        limit,
    )
    return int(status.rsplit(" ", 1)[-1])


def continuation(stored: StoredResponse) -> list[dict[str, Any]]:
    """The input items that continue from ``stored``: its conversation, then its output as
    input items (text messages, calls, sealed reasoning; what cannot be sent back is left out)."""
    items = _decode_items(stored.history)
    for item in _decode_object(stored.response).get("output") or ():
        kept = _as_input(item)
        if kept is not None:
            items.append(kept)
    return items


def _as_input(item: dict[str, Any]) -> dict[str, Any] | None:
    kind = item.get("type")
    if kind == "message":
        parts = [
            {"type": "output_text", "text": p.get("text", "")}
            for p in item.get("content") or ()
            if p.get("type") == "output_text"
        ]
        return {"type": "message", "role": "assistant", "content": parts} if parts else None
    if kind == "function_call":
        call: dict[str, Any] = {k: item[k] for k in ("call_id", "name", "arguments") if k in item}
        if item.get("namespace"):
            call["namespace"] = item["namespace"]
        return {"type": "function_call", **call}
    if kind == "custom_tool_call":
        return {"type": "custom_tool_call", **{k: item[k] for k in ("call_id", "name", "input")}}
    if kind == "reasoning" and item.get("encrypted_content"):
        return {
            "type": "reasoning",
            "id": item.get("id", ""),
            "summary": [],
            "encrypted_content": item["encrypted_content"],
        }
    return None
