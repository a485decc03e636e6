"""The price table of one model or deployment (its own module: usage records carry it, and
``envelopes`` must not import the catalogue)."""

from __future__ import annotations

from msgspec import Struct


class Prices(Struct, frozen=True):
    """Micro-dollars per million tokens (integers, so that money is never a float), and
    micro-dollars per 1,000 requests of the server tools (docs/billing.md, "Server tools")."""

    input: int
    output: int
    cache_write_5m: int
    cache_write_1h: int
    cache_read: int
    web_search_per_1k: int = 0
    web_fetch_per_1k: int = 0
