"""Request-body bytes held at once, per edge and per key (``[edge] body_bytes_in_flight``,
``body_bytes_in_flight_per_key``; docs/reliability.md, "Bodies in flight").

Each body may be 32 MB, and nothing else bounded how many an edge holds: many connections that
declare a large body and trickle it (each within its own deadline) held their share of memory for
minutes, from one key as easily as from many. A body counts from its first byte until its request
ends (the edge keeps it to publish the request again when its holder dies): its declared
``content-length`` up front, a chunked body as its chunks arrive. A body that would pass either
limit is refused whole (the caller answers 529/503 with ``retry-after``); nothing is counted for it.
"""

from __future__ import annotations

from typing import Literal

Over = Literal["key", "edge"]


class BodyBytes:
    """What the bodies being read or relayed hold, in all and per key."""

    __slots__ = ("by_key", "held", "per_edge", "per_key")

    def __init__(self, per_edge: int, per_key: int) -> None:
        self.per_edge = per_edge
        self.per_key = per_key
        self.held = 0
        self.by_key: dict[str, int] = {}

    def reserve(self, key: str, size: int) -> Over | None:
        """Count ``size`` more bytes of ``key``'s bodies; None when they fit, else the limit they
        would pass (the key's first: it is the one its client can act on), nothing counted."""
        if size <= 0:
            return None
        mine = self.by_key.get(key, 0)
        if mine + size > self.per_key:
            return "key"
        if self.held + size > self.per_edge:
            return "edge"
        self.by_key[key] = mine + size
        self.held += size
        return None

    def release(self, key: str, size: int) -> None:
        """Give back ``size`` bytes ``key`` reserved (a key holding nothing is forgotten)."""
        if size <= 0:
            return
        left = self.by_key.get(key, 0) - size
        if left > 0:
            self.by_key[key] = left
        else:
            self.by_key.pop(key, None)
        self.held -= size
