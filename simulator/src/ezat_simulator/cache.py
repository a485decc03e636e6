"""Per-instance prompt-cache accounting after Anthropic's rules (pure: the clock is passed in).

Given a request's block boundaries (``tokens.measure``):

- Only boundaries of at least ``min_tokens`` tokens take part; shorter prefixes are neither read
  nor written.
- **Read**: for every breakpoint, the boundaries from it back over at most ``LOOKBACK_BLOCKS``
  blocks are looked up, longest first. The longest prefix found (not expired) is read, for its
  token count, and its TTL starts again.
- **Write**: each breakpoint past the read prefix stores its prefix with its TTL (5 m default,
  or 1 h); the tokens from the previous breakpoint (or the read prefix) up to it are written at
  that TTL. The total written is therefore ``last breakpoint's tokens - read``.

The caller reports ``input_tokens = total - read - written``. Two identical requests in a row:
the first writes, the second reads. A longer conversation that keeps the old prefix reads it and
writes only the new part.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from .tokens import Boundary

TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}
LOOKBACK_BLOCKS = 20
DEFAULT_MAX_ENTRIES = 100_000


class CacheUsage(NamedTuple):
    read: int = 0
    write_5m: int = 0
    write_1h: int = 0

    @property
    def written(self) -> int:
        return self.write_5m + self.write_1h


NO_CACHE = CacheUsage()


class _Entry:
    __slots__ = ("expires_at", "ttl")

    def __init__(self, expires_at: float, ttl: float) -> None:
        self.expires_at = expires_at
        self.ttl = ttl


class PromptCache:
    """The prefixes one simulator instance holds: digest -> expiry."""

    def __init__(self, max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        self._entries: dict[bytes, _Entry] = {}
        self._max_entries = max_entries

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()

    def account(self, boundaries: Sequence[Boundary], now: float, min_tokens: int) -> CacheUsage:
        """Read and write the request's prefixes; return what it read and wrote."""
        breakpoints = [i for i, b in enumerate(boundaries) if b.ttl is not None]
        if not breakpoints or boundaries[breakpoints[-1]].tokens < min_tokens:
            return NO_CACHE
        hit = self._longest_hit(boundaries, breakpoints, now, min_tokens)
        read = boundaries[hit].tokens if hit >= 0 else 0
        written = {"5m": 0, "1h": 0}
        covered = read
        for i in breakpoints:
            b = boundaries[i]
            if b.tokens < min_tokens or b.tokens <= covered:
                continue
            ttl = b.ttl if b.ttl in written else "5m"
            written[ttl] += b.tokens - covered
            covered = b.tokens
            self._store(b.digest, now, TTL_SECONDS[ttl])
        return CacheUsage(read, written["5m"], written["1h"])

    def _longest_hit(
        self, boundaries: Sequence[Boundary], breakpoints: list[int], now: float, min_tokens: int
    ) -> int:
        best = -1
        for i in breakpoints:
            for j in range(i, max(best, i - LOOKBACK_BLOCKS), -1):
                if boundaries[j].tokens < min_tokens:
                    break  # earlier prefixes are shorter still
                entry = self._entries.get(boundaries[j].digest)
                if entry is None:
                    continue
                if entry.expires_at <= now:
                    del self._entries[boundaries[j].digest]
                    continue
                best = j
                break
        if best >= 0:
            entry = self._entries[boundaries[best].digest]
            entry.expires_at = now + entry.ttl
        return best

    def _store(self, digest: bytes, now: float, ttl: float) -> None:
        if len(self._entries) >= self._max_entries and digest not in self._entries:
            self._evict(now)
        self._entries[digest] = _Entry(now + ttl, ttl)

    def _evict(self, now: float) -> None:
        expired = [d for d, e in self._entries.items() if e.expires_at <= now]
        for d in expired:
            del self._entries[d]
        if len(self._entries) >= self._max_entries:
            # Still full: drop the oldest insertion (dicts keep insertion order).
            del self._entries[next(iter(self._entries))]
