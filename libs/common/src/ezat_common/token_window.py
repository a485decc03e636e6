"""Per-key one-minute windows in Redis (requests, estimated input tokens): the one rule the
edge's limits (``ezat_edge/limits.py``: RPM, the body's TPM estimate) and the translator's (the
stored conversation a ``previous_response_id`` sends upstream, which the edge never sees) count
by, in the same keys (``redis_keys.RedisKeys.requests`` and ``tokens``).

A fixed window per key and minute (``INCRBY`` + ``EXPIRE`` in one round trip). Tokens are
estimated as one per 4 bytes (README.md, "Choices where the spec is silent"). Redis unreachable:
``count`` returns None and the caller lets the request through (a limiter outage must not become
a gateway outage).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from typing import NamedTuple

from redis import asyncio as aioredis
from redis.exceptions import RedisError

from .errors import GatewayError

log = logging.getLogger("ezat.token_window")

WINDOW_SECONDS = 60
BYTES_PER_TOKEN = 4


def bytes_tokens(size: int) -> int:
    """Input tokens a window counts for ``size`` bytes: an estimate, 1 token per 4 bytes."""
    return max(1, math.ceil(size / BYTES_PER_TOKEN))


class Window(NamedTuple):
    used: int  # in this minute's window, after this request (without it, when given back)
    reset: float  # seconds until the window ends
    over: bool  # this request took the window over the limit


def headers(unit: str, limit: int, count: int, reset: float) -> dict[str, str]:
    return {
        f"x-ratelimit-limit-{unit}": str(limit),
        f"x-ratelimit-remaining-{unit}": str(max(0, limit - count)),
        f"x-ratelimit-reset-{unit}": f"{reset:.0f}s",
    }


def refused(
    allows: str, reset: float, extra: dict[str, str], who: str = "this key"
) -> GatewayError:
    """The 429 of a window this request took over the limit; ``who``: whose limit it is (the
    key's, or its team's: "this key's team `x`")."""
    return GatewayError(
        429,
        f"rate limit: {who} allows {allows}; retry after {reset:.0f} seconds",
        retry_after=max(1, round(reset)),
        headers=extra,
    )


async def count(
    redis: aioredis.Redis | None,
    name_of: Callable[[str, int], str],
    key_id: str,
    amount: int,
    limit: int,
    *,
    give_back: bool,
) -> Window | None:
    """Add ``amount`` to this minute's window ``name_of(key_id, minute)``, or None when Redis
    is unavailable (the request is let through). Over ``limit``, ``give_back`` takes the
    amount back out again."""
    if redis is None:
        return None
    now = time.time()
    reset = WINDOW_SECONDS - (now % WINDOW_SECONDS)
    name = name_of(key_id, int(now // WINDOW_SECONDS))
    try:
        async with redis.pipeline(transaction=False) as pipe:
            pipe.incrby(name, amount)
            pipe.expire(name, WINDOW_SECONDS + 1)
            used, _ = await pipe.execute()
        over = used > limit
        if over and give_back:
            await redis.decrby(name, amount)
            used -= amount
    except (RedisError, OSError) as exc:
        log.warning("rate limiter unavailable, allowing request: %s", type(exc).__name__)
        return None
    return Window(used, reset, over)


async def give_back(
    redis: aioredis.Redis | None, name_of: Callable[[str, int], str], key_id: str, amount: int
) -> None:
    """Take ``amount`` back out of this minute's window: what another refusal counted of a
    request that does not run (the edge's count of its body, when the translator refuses it)."""
    if redis is None:
        return
    name = name_of(key_id, int(time.time() // WINDOW_SECONDS))
    try:
        await redis.decrby(name, amount)
    except (RedisError, OSError) as exc:
        log.warning("rate limiter unavailable, estimate kept: %s", type(exc).__name__)
