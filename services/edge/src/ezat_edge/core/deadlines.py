"""How long the edge waits for a request's first reply (docs/reliability.md)."""

from __future__ import annotations

from ezat_common.config import Config

# Seconds past the router's worst case before a first reply (every attempt timing out) that the
# edge still waits: the router answers first (with its own error) unless it is gone.
FIRST_REPLY_MARGIN = 15.0


def first_reply_timeout(cfg: Config) -> float:
    """``edge.first_reply_timeout`` when set, else longer than the router may take to answer:
    ``max_attempts`` x (connect + first byte) plus a margin. A shorter edge timeout would show
    the client a 504 for a request the router still runs (and bills)."""
    if cfg.edge.first_reply_timeout is not None:
        return float(cfg.edge.first_reply_timeout)
    router = cfg.router
    per_attempt = router.connect_timeout + router.first_byte_timeout
    return float(max(1, router.max_attempts) * per_attempt + FIRST_REPLY_MARGIN)
