"""The stored conversation a ``previous_response_id`` sends upstream, counted in the key's
``tpm`` window (docs/responses.md, "Stored responses"). The edge counted the request's body; only
the translator sees the conversation it adds, so it adds that conversation's estimate to the same
window, by the same rule (``ezat_common/token_window.py``): one token per 4 bytes of its stored
turns. Over the limit: 429 with ``retry-after`` and the ``x-ratelimit-*-tokens`` headers, and the
whole request's estimate (the body's too) is given back, as the edge does for its own refusals.
Redis unreachable: let through, as the edge does.
"""

from __future__ import annotations

import ezat_common.redis_keys as redis_keys
from ezat_common import token_window
from redis import asyncio as aioredis

from . import metrics as m


class ConversationTokens:
    def __init__(self, redis: aioredis.Redis | None, keys: redis_keys.RedisKeys) -> None:
        self.redis = redis  # None: not counted (as the edge without Redis)
        self.keys = keys

    async def charge(self, key_id: str, tpm: int | None, size: int, body_bytes: int) -> None:
        """Count ``size`` bytes of stored conversation against ``tpm``, or raise the 429."""
        if tpm is None or size <= 0:
            return
        tokens = token_window.bytes_tokens(size)
        names = self.keys.tokens
        window = await token_window.count(self.redis, names, key_id, tokens, tpm, give_back=True)
        if window is None or not window.over:
            return
        body_tokens = token_window.bytes_tokens(body_bytes)
        await token_window.give_back(self.redis, names, key_id, body_tokens)
        m.CONVERSATION_RATE_LIMITED.inc()
        allows = (
            f"{tpm} input tokens per minute and the conversation of previous_response_id counts "
            f"as about {tokens} more (1 token per 4 bytes of its stored turns)"
        )
        used = max(0, window.used - body_tokens)
        raise token_window.refused(
            allows, window.reset, token_window.headers("tokens", tpm, used, window.reset)
        )
