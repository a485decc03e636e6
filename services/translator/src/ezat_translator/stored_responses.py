"""The translator's side of the response store (``ezat_common.response_store``; docs/responses.md,
"Stored responses"): the conversation a ``previous_response_id`` names, read before the request
is translated, and each ``store: true`` response, kept before its client gets it.

The pool connects on demand (``min_size=0``): the translator starts and serves without
PostgreSQL; only these two operations need it. A continuation that cannot be read is a 503 (the
client may retry); a response that cannot be kept is logged and counted, and the client still
gets it: it was produced and billed, and only a later continuation of it will be refused.
"""

from __future__ import annotations

import logging
from typing import Any

import asyncpg
from ezat_common import db, response_store
from ezat_common.errors import GatewayError
from ezat_common.response_store import GONE, TIMEOUT, UNAVAILABLE

from . import metrics as m

log = logging.getLogger("ezat.translator.stored_responses")

SWEEP_EVERY = 600.0
PARAM = "previous_response_id"


def not_found(response_id: str) -> GatewayError:
    return GatewayError(
        404,
        f"{PARAM}: no stored response {response_id!r} for this API key; {GONE}",
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


class StoredResponses:
    def __init__(self) -> None:
        self._pool: asyncpg.Pool | None = None

    async def pool(self) -> asyncpg.Pool:
        if self._pool is None:
            self._pool = await db.pool(min_size=0, max_size=4)
        return self._pool

    async def earlier(self, key_id: str, response_id: str) -> list[dict[str, Any]]:
        try:
            stored = await response_store.get(
                await self.pool(), key_id, response_id, timeout=TIMEOUT
            )
        except UNAVAILABLE as exc:
            m.STORED.labels("read", "failed").inc()
            log.warning("stored response unreadable: %s", type(exc).__name__)
            raise unavailable() from None
        if stored is None:
            m.STORED.labels("read", "missing").inc()
            raise not_found(response_id)
        m.STORED.labels("read", "ok").inc()
        return response_store.continuation(stored)

    async def keep(
        self, key_id: str, response_id: str, model: str, history: bytes, response: bytes
    ) -> None:
        try:
            await response_store.put(
                await self.pool(),
                key_id=key_id,
                response_id=response_id,
                model=model,
                history=history,
                response=response,
                timeout=TIMEOUT,
            )
        except UNAVAILABLE as exc:
            m.STORED.labels("write", "failed").inc()
            log.warning("response not stored: %s", type(exc).__name__)
            return
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
