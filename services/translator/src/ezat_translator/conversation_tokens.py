"""The stored conversation a ``previous_response_id`` sends upstream, counted in the key's
``tpm`` window and its team's (docs/responses.md, "Stored responses"; docs/tenancy.md). The edge
counted the request's body; only the translator sees the conversation it adds, so it adds that
conversation's estimate to the same windows, by the same rule (``ezat_common/token_window.py``):
one token per 4 bytes of its stored turns. Over a limit: 429 with ``retry-after`` and the
``x-ratelimit-*-tokens`` headers, and the whole request's estimate (the body's too) is given
back to every window it was counted in, as the edge does for its own refusals. Redis
unreachable: let through, as the edge does.
"""

from __future__ import annotations

from collections.abc import Callable

import ezat_common.redis_keys as redis_keys
from ezat_common import token_window
from ezat_common.errors import GatewayError
from redis import asyncio as aioredis

from . import metrics as m

Names = Callable[[str, int], str]


class ConversationTokens:
    def __init__(self, redis: aioredis.Redis | None, keys: redis_keys.RedisKeys) -> None:
        self.redis = redis  # None: not counted (as the edge without Redis)
        self.keys = keys

    async def charge(
        self,
        key_id: str,
        tpm: int | None,
        size: int,
        body_bytes: int,
        team_id: str | None = None,
        team_tpm: int | None = None,
    ) -> None:
        """Count ``size`` bytes of stored conversation against the key's ``tpm`` and its team's
        ``team_tpm``, or raise the 429 of the first it goes over."""
        if size <= 0:
            return
        windows: list[tuple[Names, str, int, str]] = []
        if tpm is not None:
            windows.append((self.keys.tokens, key_id, tpm, "this key"))
        if team_id is not None and team_tpm is not None:
            windows.append((self.keys.team_tokens, team_id, team_tpm, "this key's team"))
        tokens = token_window.bytes_tokens(size)
        counted: list[tuple[Names, str]] = []
        for names, owner, limit, who in windows:
            window = await token_window.count(
                self.redis, names, owner, tokens, limit, give_back=True
            )
            if window is None or not window.over:
                counted.append((names, owner))
                continue
            body_tokens = token_window.bytes_tokens(body_bytes)
            for n, o, _, _ in windows:  # the edge counted the body in each
                await token_window.give_back(self.redis, n, o, body_tokens)
            for n, o in counted:
                await token_window.give_back(self.redis, n, o, tokens)
            raise _refused(limit, tokens, max(0, window.used - body_tokens), window.reset, who)


def _refused(limit: int, tokens: int, used: int, reset: float, who: str) -> GatewayError:
    m.CONVERSATION_RATE_LIMITED.inc()
    allows = (
        f"{limit} input tokens per minute and the conversation of previous_response_id counts "
        f"as about {tokens} more (1 token per 4 bytes of its stored turns)"
    )
    headers = token_window.headers("tokens", limit, used, reset)
    return token_window.refused(allows, reset, headers, who)
