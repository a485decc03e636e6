"""A converted stream's bytes cut to fit NATS messages (docs/reliability.md, "Large stream
messages").

A converted chunk can be several times the router's: each Responses web search carries its
sealed ``web_search_call`` id (tens of kilobytes) in five events, and the final events repeat
them in ``response.completed``. The router bounds its own messages by the claim-check inline
limit; the translator's conversion may not, and a message above NATS's ``max_payload`` cannot be
published at all. So the translator sends such bytes as several numbered messages, each within
the limit; the edge writes them in order, which makes them the same bytes to the client.

Cut between whole events where one fits (the last piece keeps the final events whole, so the
end the edge holds until the usage is durable still holds ``response.completed``); an event
above the limit alone is cut inside it, which SSE readers cannot tell from a slow network.

Pure: no I/O.
"""

from __future__ import annotations

_EVENT_END = b"\n\n"


def pieces(data: bytes, limit: int) -> list[bytes]:
    """``data`` in pieces of at most ``limit`` bytes, joined back to ``data``; one piece (``data``
    itself) when it fits."""
    if len(data) <= limit:
        return [data]
    out: list[bytes] = []
    start = 0
    while len(data) - start > limit:
        # The last event end that keeps this piece within the limit; none: cut at the limit.
        cut = data.rfind(_EVENT_END, start, start + limit)
        end = cut + len(_EVENT_END) if cut >= 0 else start + limit
        out.append(data[start:end])
        start = end
    out.append(data[start:])
    return out
