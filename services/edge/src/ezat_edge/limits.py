"""Per-key request limits shared by every edge replica through Redis (SPEC §7).

A fixed one-minute window per key (``INCR`` + ``EXPIRE`` in one round trip). When Redis is
unreachable the edge lets requests through and logs it: a limiter outage must not become a
gateway outage (documented in README).

Input tokens per minute (``tpm``) use the same kind of window, counted in *estimated* tokens:
the edge holds no model logic and cannot count tokens before translation, so a request counts
``ceil(body bytes / 4)`` (about 4 bytes of JSON per token for text; conservative for images,
whose base64 bytes are many more than the tokens the model bills for them). A refused request
gives its estimate back, so it does not eat into the window it was refused from.
"""

from __future__ import annotations

import logging
import math
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

    async def check_tokens(
        self, key: ApiKey, body_bytes: int, headers: dict[str, str] | None = None
    ) -> dict[str, str]:
        """Count this request's estimated input tokens against ``key.tpm``; returns the
        x-ratelimit-*-tokens headers, or raises a 429 (carrying ``headers`` too)."""
        if key.tpm is None or self.redis is None:
            return {}
        tokens = estimate_tokens(body_bytes)
        now = time.time()
        window = int(now // 60)
        reset = 60 - (now % 60)
        name = f"ezat:tpm:{key.id}:{window}"
        try:
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.incrby(name, tokens)
                pipe.expire(name, 61)
                count, _ = await pipe.execute()
            refused = count > key.tpm
            if refused:
                await self.redis.decrby(name, tokens)
                count -= tokens
        except (RedisError, OSError) as exc:
            log.warning("rate limiter unavailable, allowing request: %s", type(exc).__name__)
            return {}
        out = {
            "x-ratelimit-limit-tokens": str(key.tpm),
            "x-ratelimit-remaining-tokens": str(max(0, key.tpm - count)),
            "x-ratelimit-reset-tokens": f"{reset:.0f}s",
        }
        if refused:
            raise GatewayError(
                429,
                f"rate limit: this key allows {key.tpm} input tokens per minute and this "
                f"request counts as about {tokens} (1 token per 4 bytes of body); "
                f"retry after {reset:.0f} seconds",
                retry_after=max(1, round(reset)),
                headers={**(headers or {}), **out},
            )
        return out

    async def close(self) -> None:
        if self.redis is not None:
            await self.redis.aclose()


def estimate_tokens(body_bytes: int) -> int:
    """Input tokens the TPM window counts for a body: an estimate, 1 token per 4 bytes."""
    return max(1, math.ceil(body_bytes / 4))
