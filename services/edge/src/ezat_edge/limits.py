"""Per-key and per-team request limits shared by every edge replica through Redis (README.md,
"Choices where the spec is silent"; keys in docs/architecture.md, Redis keys; docs/tenancy.md).

A fixed one-minute window per key and per team (``ezat_common/token_window.py``, the rule the
translator also counts a stored conversation by), for requests per minute (``rpm``) and
estimated input tokens per minute (``tpm``, ``core/estimate.py``). A request counts against its
key's windows and, when its key belongs to a team with limits, its team's: the windows of every
key of the team, on every edge. A refusal names whose limit it is and carries that window's
x-ratelimit headers; an admitted request carries those of the binding window (the one with the
fewest left). When Redis is unreachable the edge lets requests through and logs it: a limiter
outage must not become a gateway outage. A request refused by ``tpm`` gives its estimate back
(to its key's window too when its team's refused it), so it does not eat into the window it was
refused from; a request refused by ``rpm`` still counts, as every call does (one its key's
window refuses is not counted in its team's).
"""

from __future__ import annotations

from collections.abc import Callable

import ezat_common.kv as kv
import ezat_common.redis_keys as redis_keys
from ezat_common import token_window
from ezat_common.db import ApiKey
from ezat_common.token_window import WINDOW_SECONDS, Window
from redis import asyncio as aioredis

from . import metrics as m
from .core.estimate import body_tokens

# Every limited request waits on Redis for at most this long (kv.py: one policy, each its bound).
REDIS_TIMEOUT = 0.5
__all__ = ["REDIS_TIMEOUT", "WINDOW_SECONDS", "RateLimiter"]

Names = Callable[[str, int], str]


def _team(key: ApiKey) -> str:
    name = key.team_name or key.team_id
    return f"this key's team `{name}`"


def _binding(*found: tuple[int, Window | None]) -> tuple[int, Window] | None:
    """The window with the fewest left of those counted (None: not limited, or Redis away)."""
    counted = [(limit, window) for limit, window in found if window is not None]
    if not counted:
        return None
    return min(counted, key=lambda lw: lw[0] - lw[1].used)


class RateLimiter:
    def __init__(self, redis: aioredis.Redis | None, keys: redis_keys.RedisKeys) -> None:
        self.redis = redis  # None: every request is let through
        self.keys = keys

    @classmethod
    def from_env(cls) -> RateLimiter:
        return cls(kv.from_env(timeout=REDIS_TIMEOUT), redis_keys.from_env())

    async def check(self, key: ApiKey) -> dict[str, str]:
        """Count this request against its key's and its team's rpm; returns the x-ratelimit
        headers of the binding one, or raises the 429 of the one it went over. A request its
        key refuses is not counted in its team's window (it never runs)."""
        mine = await self._count(self.keys.requests, key.id, 1, key.rpm, give_back=False)
        if mine is not None and key.rpm is not None and mine.over:
            raise self._refused_requests(key.rpm, mine, "this key")
        team = None
        if key.team_id is not None and key.team_rpm is not None:
            team = await self._count(
                self.keys.team_requests, key.team_id, 1, key.team_rpm, give_back=False
            )
            if team is not None and team.over:
                raise self._refused_requests(key.team_rpm, team, _team(key))
        binding = _binding((key.rpm or 0, mine), (key.team_rpm or 0, team))
        if binding is None:
            return {}
        limit, window = binding
        return token_window.headers("requests", limit, window.used, window.reset)

    async def check_tokens(
        self, key: ApiKey, body_bytes: int, headers: dict[str, str] | None = None
    ) -> dict[str, str]:
        """Count this request's estimated input tokens against its key's and its team's tpm;
        returns the x-ratelimit-*-tokens headers of the binding one, or raises a 429 (carrying
        ``headers`` too)."""
        tokens = body_tokens(body_bytes)
        mine = await self._count(self.keys.tokens, key.id, tokens, key.tpm, give_back=True)
        if mine is not None and key.tpm is not None and mine.over:
            raise self._refused_tokens(key.tpm, tokens, mine, headers, "this key")
        team = None
        if key.team_id is not None and key.team_tpm is not None:
            team = await self._count(
                self.keys.team_tokens, key.team_id, tokens, key.team_tpm, give_back=True
            )
            if team is not None and team.over:
                if mine is not None:  # the request does not run: its key's count goes back too
                    await token_window.give_back(self.redis, self.keys.tokens, key.id, tokens)
                raise self._refused_tokens(key.team_tpm, tokens, team, headers, _team(key))
        binding = _binding((key.tpm or 0, mine), (key.team_tpm or 0, team))
        if binding is None:
            return {}
        limit, window = binding
        return token_window.headers("tokens", limit, window.used, window.reset)

    async def _count(
        self, names: Names, owner: str, amount: int, limit: int | None, *, give_back: bool
    ) -> Window | None:
        if limit is None:
            return None
        return await token_window.count(
            self.redis, names, owner, amount, limit, give_back=give_back
        )

    @staticmethod
    def _refused_requests(limit: int, window: Window, who: str) -> Exception:
        headers = token_window.headers("requests", limit, window.used, window.reset)
        m.RATE_LIMITED_REQUESTS.inc()
        return token_window.refused(f"{limit} requests per minute", window.reset, headers, who)

    @staticmethod
    def _refused_tokens(
        limit: int, tokens: int, window: Window, headers: dict[str, str] | None, who: str
    ) -> Exception:
        out = token_window.headers("tokens", limit, window.used, window.reset)
        allows = (
            f"{limit} input tokens per minute and this request counts as about {tokens} "
            "(1 token per 4 bytes of body)"
        )
        m.RATE_LIMITED_TOKENS.inc()
        return token_window.refused(allows, window.reset, {**(headers or {}), **out}, who)

    async def close(self) -> None:
        if self.redis is not None:
            await self.redis.aclose()
