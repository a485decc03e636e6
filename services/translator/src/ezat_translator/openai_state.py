"""What the OpenAI APIs' reply side keeps of one request between its route and its final reply
(``OpenAIState``; relayed.py, docs/reliability.md)."""

from __future__ import annotations

from dataclasses import dataclass

from ezat_common.exchange import Exchange

from .conversions import Conversion


@dataclass(slots=True)
class OpenAIState:
    request_id: str
    uid: str
    key_id: str
    edge_reply_to: str
    conv: Conversion  # how its replies become its API's answers
    # The relay rule's state: when the router was last heard from, the numbers it sent, whether
    # the route may be sent once more (its publishes: relayed.py; ezat_common/exchange.py).
    ex: Exchange
    # The encoded RouteRequest, kept until the router's first reply: sent once more if its
    # exchange says so (None: sent again already, a claim-checked body, or replies came).
    route: bytes | None = None
    # The last stream message numbered (ReplyChunk.seq) sent to the edge: the conversion may
    # drop a chunk, so the router's numbers (its exchange checks them) are not the edge's.
    seq_out: int = 0
    # Time spent converting this stream's chunks (one observation when it ends).
    stream_seconds: float = 0.0
    # What the route's NATS message carries (docs/observability.md, "Traces"); None: nothing.
    traceparent: str | None = None
