"""Per-key request limits shared by every edge replica through Redis (README.md, "Choices where
the spec is silent"; keys in docs/architecture.md, Redis keys).

A fixed one-minute window per key (``INCRBY`` + ``EXPIRE`` in one round trip), for requests per
minute (``rpm``) and estimated input tokens per minute (``tpm``, ``core/estimate.py``). When Redis
is unreachable the edge lets requests through and logs it: a limiter outage must not become a
gateway outage. A request refused by ``tpm`` gives its estimate back, so it does not eat into the
window it was refused from; a request refused by ``rpm`` still counts, as every call does.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import NamedTuple

import ezat_common.kv as kv
import ezat_common.redis_keys as redis_keys
from ezat_common.db import ApiKey
from ezat_common.errors import GatewayError
from redis import asyncio as aioredis
from redis.exceptions import RedisError

from . import metrics as m
from .core.estimate import body_tokens

log = logging.getLogger("ezat.edge.limits")

# Every limited request waits on Redis for at most this long (kv.py: one policy, each its bound).
REDIS_TIMEOUT = 0.5
WINDOW_SECONDS = 60


class _Window(NamedTuple):
    used: int  # in this minute's window, after this request (without it, when given back)
    reset: float  # seconds until the window ends
    over: bool  # this request took the window over the limit


def _headers(unit: str, limit: int, count: int, reset: float) -> dict[str, str]:
    return {
        f"x-ratelimit-limit-{unit}": str(limit),
        f"x-ratelimit-remaining-{unit}": str(max(0, limit - count)),
        f"x-ratelimit-reset-{unit}": f"{reset:.0f}s",
    }


def _refused(allows: str, reset: float, headers: dict[str, str]) -> GatewayError:
    """The 429 of a window this request took over the limit."""
    return GatewayError(
        429,
        f"rate limit: this key allows {allows}; retry after {reset:.0f} seconds",
        retry_after=max(1, round(reset)),
        headers=headers,
    )


class RateLimiter:
    def __init__(self, redis: aioredis.Redis | None, keys: redis_keys.RedisKeys) -> None:
        self.redis = redis  # None: every request is let through
        self.keys = keys

    @classmethod
    def from_env(cls) -> RateLimiter:
        return cls(kv.from_env(timeout=REDIS_TIMEOUT), redis_keys.from_env())

    async def check(self, key: ApiKey) -> dict[str, str]:
        """Count this request; returns the x-ratelimit headers, or raises a 429."""
        if key.rpm is None:
            return {}
        window = await self._count(self.keys.requests, key.id, 1, key.rpm, give_back=False)
        if window is None:
            return {}
        headers = _headers("requests", key.rpm, window.used, window.reset)
        if window.over:
            m.RATE_LIMITED_REQUESTS.inc()
            raise _refused(f"{key.rpm} requests per minute", window.reset, headers)
        return headers

    async def check_tokens(
        self, key: ApiKey, body_bytes: int, headers: dict[str, str] | None = None
    ) -> dict[str, str]:
        """Count this request's estimated input tokens against ``key.tpm``; returns the
        x-ratelimit-*-tokens headers, or raises a 429 (carrying ``headers`` too)."""
        if key.tpm is None:
            return {}
        tokens = body_tokens(body_bytes)
        window = await self._count(self.keys.tokens, key.id, tokens, key.tpm, give_back=True)
        if window is None:
            return {}
        out = _headers("tokens", key.tpm, window.used, window.reset)
        if window.over:
            allows = (
                f"{key.tpm} input tokens per minute and this request counts as about {tokens} "
                "(1 token per 4 bytes of body)"
            )
            m.RATE_LIMITED_TOKENS.inc()
            raise _refused(allows, window.reset, {**(headers or {}), **out})
        return out

    async def _count(
        self,
        name_of: Callable[[str, int], str],
        key_id: str,
        amount: int,
        limit: int,
        *,
        give_back: bool,
    ) -> _Window | None:
        """Add ``amount`` to this minute's window ``name_of(key_id, minute)``, or None when Redis
        is unavailable (the request is let through). Over ``limit``, ``give_back`` takes the
        amount back out again."""
        if self.redis is None:
            return None
        now = time.time()
        reset = WINDOW_SECONDS - (now % WINDOW_SECONDS)
        name = name_of(key_id, int(now // WINDOW_SECONDS))
        try:
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.incrby(name, amount)
                pipe.expire(name, WINDOW_SECONDS + 1)
                count, _ = await pipe.execute()
            over = count > limit
            if over and give_back:
                await self.redis.decrby(name, amount)
                count -= amount
        except (RedisError, OSError) as exc:
            log.warning("rate limiter unavailable, allowing request: %s", type(exc).__name__)
            return None
        return _Window(count, reset, over)

    async def close(self) -> None:
        if self.redis is not None:
            await self.redis.aclose()
