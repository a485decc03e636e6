"""What the OpenAI path keeps of one request between its route and its final reply
(``OpenAIState``; openai_path.py, docs/reliability.md)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from .conversions import Conversion


@dataclass(slots=True)
class OpenAIState:
    request_id: str
    uid: str
    key_id: str
    edge_reply_to: str
    conv: Conversion  # how its replies become its API's answers
    # The encoded RouteRequest, kept until the router's first reply: sent once more if that
    # router dies first (None: sent again already, a claim-checked body, or replies came).
    route: bytes | None = None
    # When the router was last heard from (any reply or heartbeat), monotonic.
    heard: float = field(default_factory=time.monotonic)
    # Stream messages numbered (ReplyChunk.seq): the last received from the router, the last
    # sent to the edge (the conversion may drop a chunk, so the two differ).
    seq_in: int = 0
    seq_out: int = 0
    # Time spent converting this stream's chunks (one observation when it ends).
    stream_seconds: float = 0.0
    # What the route's NATS message carries (docs/observability.md, "Traces"); None: nothing.
    traceparent: str | None = None
