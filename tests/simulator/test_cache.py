"""Prompt-cache accounting: reads, writes, TTLs, lookback and minimum size."""

from __future__ import annotations

from typing import Any

import pytest
from ezat_simulator.cache import LOOKBACK_BLOCKS, NO_CACHE, CacheUsage, PromptCache
from ezat_simulator.tokens import Boundary, measure


def b(tokens: int, name: str, ttl: str | None = None) -> Boundary:
    return Boundary(tokens, name.encode(), ttl)


@pytest.mark.parametrize(
    ("boundaries", "min_tokens", "expected"),
    [
        ([b(100, "a")], 10, NO_CACHE),  # no breakpoint
        ([b(100, "a", "5m")], 200, NO_CACHE),  # below the minimum
        ([b(100, "a", "5m")], 100, CacheUsage(0, 100, 0)),
        ([b(100, "a", "1h")], 10, CacheUsage(0, 0, 100)),
        ([b(100, "a", "1h"), b(150, "b"), b(300, "c", "5m")], 10, CacheUsage(0, 200, 100)),
        # The first breakpoint is too small to count on its own: its range goes to the next one.
        ([b(50, "a", "1h"), b(300, "c", "5m")], 100, CacheUsage(0, 300, 0)),
    ],
)
def test_first_request_writes(
    boundaries: list[Boundary], min_tokens: int, expected: CacheUsage
) -> None:
    cache = PromptCache()
    assert cache.account(boundaries, 0.0, min_tokens) == expected
    assert len(cache) == sum(
        1 for x in boundaries if x.ttl and x.tokens >= min_tokens and expected.written
    )


def test_second_identical_request_reads_everything() -> None:
    cache = PromptCache()
    req = [b(100, "a", "5m"), b(300, "c", "5m")]
    cache.account(req, 0.0, 10)
    assert cache.account(req, 1.0, 10) == CacheUsage(300, 0, 0)


def test_entries_expire_and_reads_refresh_them() -> None:
    cache = PromptCache()
    req = [b(100, "a", "5m")]
    cache.account(req, 0.0, 10)
    assert cache.account(req, 299.0, 10).read == 100  # read at 299 s: alive until 599 s
    assert cache.account(req, 598.0, 10).read == 100
    assert cache.account(req, 898.0, 10 + 0) == CacheUsage(0, 100, 0)  # expired: written again


def test_one_hour_entries_outlive_five_minutes() -> None:
    cache = PromptCache()
    cache.account([b(100, "a", "1h")], 0.0, 10)
    assert cache.account([b(100, "a", "1h")], 3000.0, 10).read == 100


def test_lookback_finds_an_earlier_prefix_without_a_breakpoint_there() -> None:
    cache = PromptCache()
    cache.account([b(100, "s"), b(200, "m1", "5m")], 0.0, 10)
    turn2 = [b(100, "s"), b(200, "m1"), b(260, "m2"), b(320, "m3", "5m")]
    assert cache.account(turn2, 1.0, 10) == CacheUsage(200, 120, 0)


@pytest.mark.parametrize(
    ("blocks_after", "read"), [(LOOKBACK_BLOCKS - 1, 100), (LOOKBACK_BLOCKS, 0)]
)
def test_lookback_is_limited_to_twenty_blocks(blocks_after: int, read: int) -> None:
    cache = PromptCache()
    cache.account([b(100, "p", "5m")], 0.0, 10)
    later = [b(101 + i, f"x{i}") for i in range(blocks_after)]
    later[-1] = later[-1]._replace(ttl="5m")
    assert cache.account([b(100, "p"), *later], 1.0, 10).read == read


def test_full_cache_evicts_the_oldest() -> None:
    cache = PromptCache(max_entries=2)
    for name in ("a", "b", "c"):
        cache.account([b(100, name, "5m")], 0.0, 10)
    assert len(cache) == 2
    assert cache.account([b(100, "a", "5m")], 1.0, 10).read == 0
    assert cache.account([b(100, "c", "5m")], 1.0, 10).read == 100


def _conversation(turns: int) -> dict[str, Any]:
    system = [{"type": "text", "text": "x" * 4400, "cache_control": {"type": "ephemeral"}}]
    messages: list[dict[str, Any]] = []
    for i in range(turns):
        messages.append({"role": "user", "content": f"question {i} " + "q" * 400})
        messages.append({"role": "assistant", "content": f"answer {i} " + "a" * 400})
    messages.append(
        {
            "role": "user",
            "content": [{"type": "text", "text": "last", "cache_control": {"type": "ephemeral"}}],
        }
    )
    return {"model": "m", "system": system, "messages": messages}


def test_a_growing_conversation_reads_its_earlier_turns() -> None:
    cache = PromptCache()
    first = measure(_conversation(1), "m")
    u1 = cache.account(first.boundaries, 0.0, 1024)
    assert u1 == CacheUsage(0, first.input_tokens, 0)
    # Turn 2 replaces the last user block: the system prefix (1100 tokens) is read back.
    second = measure(_conversation(2), "m")
    u2 = cache.account(second.boundaries, 1.0, 1024)
    assert u2.read == 1100
    assert u2.read + u2.written == second.input_tokens
