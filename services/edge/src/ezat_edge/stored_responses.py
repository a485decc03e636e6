"""``GET`` and ``DELETE /openai/v1/responses/{id}``: the calling key's stored responses
(``ezat_common.response_store``; docs/responses.md, "Stored responses"). Another key's response,
an expired one and one never stored are the same 404; so is, on GET, one made with a model the
key may no longer use (docs/tenancy.md, "How a request is authorized"), which it may still
DELETE.
"""

from __future__ import annotations

import asyncpg
import msgspec
from aiohttp import web
from ezat_common import response_store
from ezat_common.errors import GatewayError
from ezat_common.response_store import GONE, TIMEOUT, UNAVAILABLE

from .auth import Authenticator
from .core.model_access import ModelAccess
from .limits import RateLimiter
from .responses import JSON


def not_found(response_id: str) -> GatewayError:
    return GatewayError(
        404,
        f"No response with id {response_store.shown(response_id)} found for this API key; {GONE}",
        code="not_found",
    )


def unavailable() -> GatewayError:
    return GatewayError(
        503, "stored responses cannot be read right now; retry shortly", retry_after=2
    )


class StoredResponses:
    def __init__(
        self, auth: Authenticator, limiter: RateLimiter, access: ModelAccess | None = None
    ) -> None:
        self.auth = auth
        self.limiter = limiter
        self.access = access  # None: every stored response of the key is shown
        # Its own pool (app.py): never the one key lookups use.
        self.pool: asyncpg.Pool | None = None

    async def get(self, request: web.Request) -> web.Response:
        key = await self.auth.authenticate(request)
        await self.limiter.check(key)  # counted against the key's rpm as every call is
        response_id = request.match_info["response_id"]
        if not response_store.well_formed(response_id):
            raise not_found(response_id)
        try:
            stored = await response_store.get(self._pool(), key.id, response_id, timeout=TIMEOUT)
        except UNAVAILABLE:
            raise unavailable() from None
        if stored is None or (
            self.access is not None and not self.access.permits(key, stored.model)
        ):
            raise not_found(response_id)
        return web.Response(body=stored.response, content_type=JSON)

    async def delete(self, request: web.Request) -> web.Response:
        key = await self.auth.authenticate(request)
        await self.limiter.check(key)  # counted against the key's rpm as every call is
        response_id = request.match_info["response_id"]
        if not response_store.well_formed(response_id):
            raise not_found(response_id)
        try:
            deleted = await response_store.delete(
                self._pool(), key.id, response_id, timeout=TIMEOUT
            )
        except UNAVAILABLE:
            raise unavailable() from None
        if not deleted:
            raise not_found(response_id)
        body = {"id": response_id, "object": "response", "deleted": True}
        return web.Response(body=msgspec.json.encode(body), content_type=JSON)

    def _pool(self) -> asyncpg.Pool:
        pool = self.pool
        if pool is None:  # not connected yet, or PostgreSQL away since the edge started
            raise unavailable()
        return pool
