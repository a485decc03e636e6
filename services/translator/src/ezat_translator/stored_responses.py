"""The translator's side of the response store (``ezat_common.response_store``; docs/responses.md,
"Stored responses"): the conversation a ``previous_response_id`` names, read before the request
is translated, the stored-bytes quota checked before a ``store: true`` request goes upstream,
and each ``store: true`` response, kept before its client gets it.

A row keeps its own turn only (``core/stored_turns``) and a link to the response it continued;
reading a conversation walks the links, at most ``stored_chain_max_turns`` of them and
``stored_chain_max_bytes`` of turns, in one query (2 s).

The pool connects on demand (``min_size=0``): the translator starts and serves without
PostgreSQL; only these operations need it. A continuation that cannot be read is a 503 (the
client may retry); a quota that cannot be read does not refuse (the write would say more); a
response that cannot be kept is logged and counted, and the client still gets it: it was
produced and billed, and only a later continuation of it will be refused.
"""

from __future__ import annotations

import logging
import time
from typing import Any, NamedTuple

import asyncpg
import msgspec
from ezat_common import db, response_store
from ezat_common.config import TranslatorConfig
from ezat_common.errors import GatewayError
from ezat_common.response_store import GONE, TIMEOUT, UNAVAILABLE

from . import metrics as m
from .core.stored_turns import assistant_turn

log = logging.getLogger("ezat.translator.stored_responses")

SWEEP_EVERY = 600.0
PARAM = "previous_response_id"
# A key's stored bytes are read at most this often per translator (a store: true request does
# not each cost a sum over the key's rows); the quota may be passed by what is stored meanwhile.
USAGE_FRESH = 5.0
_USAGE_KEYS = 10_000  # bound of that cache: cleared when full

_decode_turns = msgspec.json.Decoder(list[dict[str, Any]]).decode
_decode_response = msgspec.json.Decoder(dict[str, Any]).decode
_encode = msgspec.json.Encoder().encode


def not_found(response_id: str) -> GatewayError:
    return GatewayError(
        404,
        f"{PARAM}: no stored response {response_store.shown(response_id)} for this API key; {GONE}",
        param=PARAM,
        code="previous_response_not_found",
    )


def unavailable() -> GatewayError:
    return GatewayError(
        503,
        f"{PARAM}: stored responses cannot be read right now; retry, or send the "
        "conversation's items in input",
        param=PARAM,
        retry_after=2,
    )


def _too_long(what: str) -> GatewayError:
    return GatewayError(
        400,
        f"{PARAM}: the conversation is longer than {what} kept for a continuation; start a new "
        "one: send the items it needs in input",
        param=PARAM,
        code="previous_response_too_long",
    )


class Earlier(NamedTuple):
    """A conversation read back, still encoded: decoding it costs ~100 ms per MB of small
    items, so it is decoded where the request is translated (in a worker thread when large,
    docs/reliability.md, "Large bodies"), never on the event loop here."""

    encoded: list[bytes]  # each response's own turns (core/stored_turns.py), oldest first
    size: int  # their bytes as stored: what the TPM estimate counts
    model: str = ""  # the model the continued response was made with, as the client named it

    def turns(self) -> list[dict[str, Any]]:
        turns: list[dict[str, Any]] = []
        for encoded in self.encoded:
            turns.extend(_decode_turns(encoded))
        return turns


class StoredResponses:
    def __init__(self, limits: TranslatorConfig | None = None) -> None:
        self.limits = limits or TranslatorConfig()
        self._pool: asyncpg.Pool | None = None
        self._usage: dict[str, tuple[int, float]] = {}
        self._unreadable_until = 0.0

    async def pool(self) -> asyncpg.Pool:
        if self._pool is None:
            # A connection is made on a request's path: a database that accepts and never
            # answers is a 503 after TIMEOUT, as a slow query is, not a minute's wait.
            self._pool = await db.pool(min_size=0, max_size=4, connect_timeout=TIMEOUT)
        return self._pool

    async def earlier(self, key_id: str, response_id: str) -> Earlier:
        """The canonical turns of the conversation ending at ``response_id``, oldest first."""
        if not response_store.well_formed(response_id):
            m.STORED.labels("read", "missing").inc()
            raise not_found(response_id)
        limits = self.limits
        try:
            links = await response_store.chain(
                await self.pool(),
                key_id,
                response_id,
                max_links=limits.stored_chain_max_turns,
                max_bytes=limits.stored_chain_max_bytes,
                timeout=TIMEOUT,
            )
        except UNAVAILABLE as exc:
            m.STORED.labels("read", "failed").inc()
            log.warning("stored response unreadable: %s", type(exc).__name__)
            raise unavailable() from None
        if not links:
            m.STORED.labels("read", "missing").inc()
            raise not_found(response_id)
        last = links[-1]
        if last.total > limits.stored_chain_max_bytes:
            m.STORED.labels("read", "refused").inc()
            raise _too_long(
                f"the {limits.stored_chain_max_bytes} bytes of turns "
                "(translator.stored_chain_max_bytes)"
            )
        # A conversation holds at most stored_chain_max_turns responses: one that has them all
        # is not continued (and a walk stopped at the limit never reached the start anyway).
        if len(links) >= limits.stored_chain_max_turns:
            m.STORED.labels("read", "refused").inc()
            raise _too_long(
                f"the {limits.stored_chain_max_turns} responses (translator.stored_chain_max_turns)"
            )
        if last.previous_id is not None or any(link.turns is None for link in links):
            # A link deleted by its sweep, or a row kept before turns were: the start is gone.
            m.STORED.labels("read", "missing").inc()
            raise GatewayError(
                404,
                f"{PARAM}: the start of the conversation of {response_store.shown(response_id)} "
                "is no longer stored; send the conversation's items in input",
                param=PARAM,
                code="previous_response_not_found",
            )
        m.STORED.labels("read", "ok").inc()
        turns = [link.turns or b"[]" for link in reversed(links)]
        return Earlier(turns, last.total, links[0].model)

    async def check(self, key_id: str, new_bytes: int) -> None:
        """Refuse a ``store: true`` turn whose own content, or whose key's stored bytes, pass
        their limit (400, before the request goes upstream)."""
        limits = self.limits
        if new_bytes > limits.stored_response_max_bytes:
            raise GatewayError(
                400,
                f"store: this turn's new content is {new_bytes} bytes; a stored response keeps at "
                f"most {limits.stored_response_max_bytes} (translator.stored_response_max_bytes);"
                " send store: false, or less in input",
                param="store",
                code="stored_response_too_large",
            )
        used = await self._used(key_id)
        if used is not None and used + new_bytes > limits.stored_bytes_per_key:
            raise GatewayError(
                400,
                f"store: this API key keeps {used} bytes of stored responses and may keep "
                f"{limits.stored_bytes_per_key} (translator.stored_bytes_per_key); delete old "
                "responses (DELETE /openai/v1/responses/{id}) or send store: false",
                param="store",
                code="stored_responses_quota_exceeded",
            )

    async def _used(self, key_id: str) -> int | None:
        now = time.monotonic()
        cached = self._usage.get(key_id)
        if cached is not None and now - cached[1] < USAGE_FRESH:
            return cached[0]
        if now < self._unreadable_until:
            return None  # PostgreSQL just failed: no request waits on it again for a while
        try:
            used = await response_store.stored_bytes(await self.pool(), key_id, timeout=TIMEOUT)
        except UNAVAILABLE as exc:
            self._unreadable_until = time.monotonic() + USAGE_FRESH
            log.warning("stored bytes unreadable: %s", type(exc).__name__)
            return None
        if len(self._usage) >= _USAGE_KEYS:
            self._usage.clear()
        self._usage[key_id] = (used, now)
        return used

    async def keep(
        self,
        key_id: str,
        response_id: str,
        previous_id: str | None,
        model: str,
        new_turns: bytes,
        response: bytes,
    ) -> None:
        """Store the response with its turn: ``new_turns``, then the answer's own turn."""
        answer = assistant_turn(_decode_response(response).get("output") or [])
        turns = new_turns
        if answer is not None:
            # Appended to the encoded list (msgspec's compact "[...]"), not decoded again.
            head = new_turns[:-1] + (b"," if len(new_turns) > 2 else b"")
            turns = head + _encode(answer) + b"]"
        try:
            await response_store.put(
                await self.pool(),
                key_id=key_id,
                response_id=response_id,
                previous_id=previous_id,
                model=model,
                turns=turns,
                response=response,
                timeout=TIMEOUT,
            )
        except UNAVAILABLE as exc:
            m.STORED.labels("write", "failed").inc()
            log.warning("response not stored: %s", type(exc).__name__)
            return
        cached = self._usage.get(key_id)
        if cached is not None:
            self._usage[key_id] = (cached[0] + len(turns) + len(response), cached[1])
        m.STORED.labels("write", "ok").inc()

    async def sweep(self) -> int:
        """Expired responses deleted (one batch; every translator sweeps, harmlessly)."""
        try:
            return await response_store.sweep(await self.pool())
        except UNAVAILABLE:
            return 0

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
