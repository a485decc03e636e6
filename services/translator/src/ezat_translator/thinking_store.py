"""Thinking blocks kept server-side for OpenAI clients (Redis, keyed by API key + tool-call id).

Anthropic models need the thinking blocks of an assistant turn that called a tool when that turn
is sent back, but OpenAI clients never see them. After a turn that called tools we store its
blocks under each tool-call id (TTL 2 h); when a client sends that turn again we put them back.
The key id is part of the Redis key (``redis_keys.py``): a tool-call id is visible to whoever
holds the conversation, and another tenant presenting it must not get this tenant's thinking.
Redis trouble only degrades: the caller then drops thinking for that request.
"""

from __future__ import annotations

import logging
from typing import Any

import ezat_common.kv as kv
import ezat_common.redis_keys as redis_keys
import msgspec
from redis import asyncio as aioredis
from redis.exceptions import RedisError

from .core.openai_to_anthropic import ChatTranslation

log = logging.getLogger("ezat.translator.thinking")

TTL_SECONDS = 2 * 3600
_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder(list[dict[str, Any]]).decode


# A tool turn waits on Redis for at most this long (kv.py: one policy, each its bound).
REDIS_TIMEOUT = 0.25


class ThinkingStore:
    def __init__(self, redis: aioredis.Redis | None, keys: redis_keys.RedisKeys) -> None:
        self.redis = redis  # None: thinking is dropped from tool turns
        self.keys = keys

    @classmethod
    def from_env(cls) -> ThinkingStore:
        return cls(kv.from_env(timeout=REDIS_TIMEOUT), redis_keys.from_env())

    async def keep(
        self, key_id: str, tool_call_ids: list[str], blocks: list[dict[str, Any]]
    ) -> None:
        if self.redis is None or not tool_call_ids or not blocks:
            return
        data = _encode(blocks)
        try:
            async with self.redis.pipeline(transaction=False) as pipe:
                for call_id in tool_call_ids:
                    pipe.set(self.keys.thinking(key_id, call_id), data, ex=TTL_SECONDS)
                await pipe.execute()
        except (RedisError, OSError) as exc:
            log.warning("thinking blocks not kept: %s", type(exc).__name__)

    async def find(self, key_id: str, tool_call_ids: list[str]) -> list[dict[str, Any]] | None:
        """The blocks of the turn that made these calls, or None when they are gone."""
        if self.redis is None or not tool_call_ids:
            return None
        try:
            found = await self.redis.mget(
                [self.keys.thinking(key_id, call_id) for call_id in tool_call_ids]
            )
            data = next((d for d in found if d), None)
            if data:
                return _decode(data)
        except (RedisError, OSError, msgspec.DecodeError) as exc:
            log.warning("thinking blocks not read: %s", type(exc).__name__)
        return None

    async def restore(self, key_id: str, ct: ChatTranslation) -> None:
        """Put each tool-calling turn's thinking back; if any is gone, drop thinking instead."""
        restored: list[tuple[int, list[dict[str, object]]]] = []
        for index, call_ids in ct.tool_turns:
            blocks = await self.find(key_id, call_ids)
            if blocks is None:
                log.info("thinking blocks of an earlier turn are gone; thinking off for this turn")
                ct.body.pop("thinking", None)
                config = ct.body.get("output_config")
                if isinstance(config, dict):
                    config.pop("effort", None)
                    if not config:
                        ct.body.pop("output_config", None)
                return
            restored.append((index, blocks))
        for index, blocks in restored:
            content = ct.body["messages"][index]["content"]
            content[:0] = blocks

    async def close(self) -> None:
        if self.redis is not None:
            await self.redis.aclose()
