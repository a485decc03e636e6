"""Stored Responses API responses (``store: true``) in PostgreSQL: kept 30 days, scoped to the
API key that created them (docs/responses.md, "Stored responses").

The translator writes a response before its client gets it (a ``previous_response_id`` may
follow at once) and reads the conversation a continuation names; the edge answers GET and
DELETE. Every query names the key id: another key's response does not exist for it.

A row keeps only its own turn (``turns``: the canonical Messages turns the translation used,
thinking sealed) and the id of the response it continued; a conversation is read by walking
those links, bounded in links and bytes (``chain``), so no turn re-reads or re-writes the
conversation before it.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import asyncpg
import msgspec

TTL_SECONDS = 30 * 86400
# Why a response is not there, whoever asks (GET, DELETE, previous_response_id): one sentence.
GONE = "it was not stored (store: false), was deleted, or expired (responses are kept 30 days)"
# What a caller waits for at most, per operation, and what it means the store cannot answer now.
TIMEOUT = 2.0
UNAVAILABLE = (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, asyncio.TimeoutError)

# A response id: ``resp_`` and the request's uid (32 hex digits), or, for responses stored
# before ids were uids, the request id (1-128 of ``[A-Za-z0-9._:-]``, ezat_edge/ids.py). Anything
# else (NUL, control characters, overlong) is a 404 before any query: PostgreSQL refuses a NUL,
# which would otherwise read as the store being down.
_ID = re.compile(r"resp_[A-Za-z0-9._:-]{1,128}")
ID_SHOWN = 140  # an id longer than any real one is cut to this in the 404's message


def well_formed(response_id: str) -> bool:
    """Whether ``response_id`` can name a stored response at all (checked before any query)."""
    return _ID.fullmatch(response_id) is not None


def shown(response_id: str) -> str:
    """The id as a 404 repeats it: quoted, escaped, cut."""
    return repr(response_id[:ID_SHOWN])


class StoredResponse(msgspec.Struct, frozen=True, kw_only=True):
    """What GET returns (the response object, as sent), never the conversation."""

    key_id: str
    id: str
    model: str
    created_at: int  # unix seconds
    expires_at: int
    response: bytes  # JSON: the response object, as sent


class Link(msgspec.Struct, frozen=True):
    """One response of a conversation as a continuation reads it: its own turns, and the
    response it continued (None: the conversation's first)."""

    id: str
    previous_id: str | None
    turns: bytes | None  # JSON list of Messages turns; None: stored before turns were kept
    total: int  # the bytes of turns from the head down to this link
    model: str = ""  # the model the response was made with, as the client named it


async def put(
    db: Any,
    *,
    key_id: str,
    response_id: str,
    previous_id: str | None,
    model: str,
    turns: bytes,
    response: bytes,
    ttl: int = TTL_SECONDS,
    timeout: float | None = None,
) -> None:
    """Keep a response; ``db`` is an asyncpg pool or connection. An id is a request's uid: a
    second write of it (a redelivered request) changes nothing."""
    await db.execute(
        "INSERT INTO stored_responses"
        " (key_id, id, previous_id, model, expires_at, turns, response, size)"
        " VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5), $6, $7, $8)"
        " ON CONFLICT (key_id, id) DO NOTHING",
        key_id,
        response_id,
        previous_id,
        model,
        float(ttl),
        turns,
        response,
        len(turns) + len(response),
        timeout=timeout,
    )


async def get(
    db: Any, key_id: str, response_id: str, *, timeout: float | None = None
) -> StoredResponse | None:
    """The live response ``response_id`` of ``key_id``; None if missing, expired or another's."""
    row = await db.fetchrow(
        "SELECT key_id, id, model, extract(epoch FROM created_at)::bigint AS created_at,"
        " extract(epoch FROM expires_at)::bigint AS expires_at, response"
        " FROM stored_responses WHERE key_id = $1 AND id = $2 AND expires_at > now()",
        key_id,
        response_id,
        timeout=timeout,
    )
    return None if row is None else StoredResponse(**dict(row))


async def chain(
    db: Any,
    key_id: str,
    response_id: str,
    *,
    max_links: int,
    max_bytes: int,
    timeout: float | None = None,
) -> list[Link]:
    """The conversation ending at the live response ``response_id``, newest first: at most
    ``max_links`` links, and no link past the first whose running ``total`` exceeds
    ``max_bytes`` (the caller tells a cut conversation by its last link's ``previous_id``).
    Earlier links are read even when expired: a row is kept while a later one continues it."""
    rows = await db.fetch(
        "WITH RECURSIVE chain (id, previous_id, turns, n, total, model) AS ("
        " SELECT id, previous_id, turns, 1, coalesce(octet_length(turns), 0)::bigint, model"
        " FROM stored_responses WHERE key_id = $1 AND id = $2 AND expires_at > now()"
        " UNION ALL"
        " SELECT s.id, s.previous_id, s.turns, c.n + 1,"
        " c.total + coalesce(octet_length(s.turns), 0), s.model"
        " FROM chain c JOIN stored_responses s ON s.key_id = $1 AND s.id = c.previous_id"
        " WHERE c.n < $3 AND c.total <= $4)"
        " SELECT id, previous_id, turns, total, model FROM chain ORDER BY n",
        key_id,
        response_id,
        max_links,
        max_bytes,
        timeout=timeout,
    )
    return [Link(r["id"], r["previous_id"], r["turns"], r["total"], r["model"]) for r in rows]


async def stored_bytes(db: Any, key_id: str, *, timeout: float | None = None) -> int:
    """The bytes ``key_id`` keeps now (what its quota counts)."""
    value = await db.fetchval(
        "SELECT coalesce(sum(size), 0)::bigint FROM stored_responses WHERE key_id = $1",
        key_id,
        timeout=timeout,
    )
    return int(value)


async def delete(db: Any, key_id: str, response_id: str, *, timeout: float | None = None) -> bool:
    """True if a live response of ``key_id`` was deleted. One that a later response continues
    is only hidden (expired now): the later one's conversation still reads it, as its own copy
    did when every row kept the whole conversation; the sweep removes it with the last one."""
    status = await db.execute(
        "DELETE FROM stored_responses s WHERE key_id = $1 AND id = $2 AND expires_at > now()"
        " AND NOT EXISTS (SELECT 1 FROM stored_responses c"
        " WHERE c.key_id = s.key_id AND c.previous_id = s.id)",
        key_id,
        response_id,
        timeout=timeout,
    )
    if status != "DELETE 0":
        return True
    status = await db.execute(
        "UPDATE stored_responses SET expires_at = now()"
        " WHERE key_id = $1 AND id = $2 AND expires_at > now()",
        key_id,
        response_id,
        timeout=timeout,
    )
    return bool(status != "UPDATE 0")


async def sweep(db: Any, limit: int = 1000) -> int:
    """Delete up to ``limit`` expired responses that no kept response continues (a batch: no
    long lock; a conversation goes from its newest end, one link per sweep); how many went."""
    status = await db.execute(
        "DELETE FROM stored_responses WHERE ctid IN (SELECT s.ctid FROM stored_responses s"
        " WHERE s.expires_at <= now() AND NOT EXISTS (SELECT 1 FROM stored_responses c"
        " WHERE c.key_id = s.key_id AND c.previous_id = s.id) LIMIT $1)",
        limit,
    )
    return int(status.rsplit(" ", 1)[-1])
