"""Per-key request limits shared by every edge replica through Redis (README.md, "Choices where
the spec is silent"; keys in docs/architecture.md, Redis keys).

A fixed one-minute window per key (``ezat_common/token_window.py``, the rule the translator also
counts a stored conversation by), for requests per minute (``rpm``) and estimated input tokens
per minute (``tpm``, ``core/estimate.py``). When Redis is unreachable the edge lets requests
through and logs it: a limiter outage must not become a gateway outage. A request refused by
``tpm`` gives its estimate back, so it does not eat into the window it was refused from; a
request refused by ``rpm`` still counts, as every call does.
"""

from __future__ import annotations

import ezat_common.kv as kv
import ezat_common.redis_keys as redis_keys
from ezat_common import token_window
from ezat_common.db import ApiKey
from ezat_common.token_window import WINDOW_SECONDS
from redis import asyncio as aioredis

from . import metrics as m
from .core.estimate import body_tokens

# Every limited request waits on Redis for at most this long (kv.py: one policy, each its bound).
REDIS_TIMEOUT = 0.5
__all__ = ["REDIS_TIMEOUT", "WINDOW_SECONDS", "RateLimiter"]


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
        window = await token_window.count(
            self.redis, self.keys.requests, key.id, 1, key.rpm, give_back=False
        )
        if window is None:
            return {}
        headers = token_window.headers("requests", key.rpm, window.used, window.reset)
        if window.over:
            m.RATE_LIMITED_REQUESTS.inc()
            raise token_window.refused(f"{key.rpm} requests per minute", window.reset, headers)
        return headers

    async def check_tokens(
        self, key: ApiKey, body_bytes: int, headers: dict[str, str] | None = None
    ) -> dict[str, str]:
        """Count this request's estimated input tokens against ``key.tpm``; returns the
        x-ratelimit-*-tokens headers, or raises a 429 (carrying ``headers`` too)."""
        if key.tpm is None:
            return {}
        tokens = body_tokens(body_bytes)
        window = await token_window.count(
            self.redis, self.keys.tokens, key.id, tokens, key.tpm, give_back=True
        )
        if window is None:
            return {}
        out = token_window.headers("tokens", key.tpm, window.used, window.reset)
        if window.over:
            allows = (
                f"{key.tpm} input tokens per minute and this request counts as about {tokens} "
                "(1 token per 4 bytes of body)"
            )
            m.RATE_LIMITED_TOKENS.inc()
            raise token_window.refused(allows, window.reset, {**(headers or {}), **out})
        return out

    async def close(self) -> None:
        if self.redis is not None:
            await self.redis.aclose()
