"""Per-key request limits shared by every edge replica through Redis (SPEC §7).

A fixed one-minute window per key (``INCR`` + ``EXPIRE`` in one round trip). When Redis is
unreachable the edge lets requests through and logs it: a limiter outage must not become a
gateway outage (documented in README).
"""

from __future__ import annotations

import logging
import time

from ezat_common.db import ApiKey
from ezat_common.errors import GatewayError
from redis import asyncio as aioredis
from redis.exceptions import RedisError

log = logging.getLogger("ezat.edge.limits")


class RateLimiter:
    def __init__(self, url: str | None) -> None:
        self.redis = aioredis.from_url(url, socket_timeout=0.5) if url else None

    async def check(self, key: ApiKey) -> dict[str, str]:
        """Count this request; returns the x-ratelimit headers, or raises a 429."""
        if key.rpm is None or self.redis is None:
            return {}
        now = time.time()
        window = int(now // 60)
        reset = 60 - (now % 60)
        name = f"ezat:rl:{key.id}:{window}"
        try:
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.incr(name)
                pipe.expire(name, 61)
                count, _ = await pipe.execute()
        except (RedisError, OSError) as exc:
            log.warning("rate limiter unavailable, allowing request: %s", type(exc).__name__)
            return {}
        headers = {
            "x-ratelimit-limit-requests": str(key.rpm),
            "x-ratelimit-remaining-requests": str(max(0, key.rpm - count)),
            "x-ratelimit-reset-requests": f"{reset:.0f}s",
        }
        if count > key.rpm:
            err = GatewayError(
                429,
                f"rate limit: this key allows {key.rpm} requests per minute; "
                f"retry after {reset:.0f} seconds",
                retry_after=max(1, round(reset)),
                headers=headers,
            )
            raise err
        return headers

    async def close(self) -> None:
        if self.redis is not None:
            await self.redis.aclose()
