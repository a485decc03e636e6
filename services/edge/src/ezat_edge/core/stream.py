"""One step of a stream's relay loop: what each reply adds to the stream's next write, and how
it changes what the stream knows of itself (docs/reliability.md, "A holder dies" and "A 3-node
NATS cluster"). Whether a reply counts (its number, its holder's silence) is its ``Exchange``'s
(ezat_common/exchange.py); the loop, its queue and its clock are streams.py's and
stream_relay.py's."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from ezat_common import envelopes
from ezat_common.envelopes import Heartbeat, ReplyChunk, ReplyEnd, ReplyError, ReplyHead

from .routes import Format

ANTHROPIC_PING = b'event: ping\ndata: {"type": "ping"}\n\n'
OPENAI_PING = b": ping\n\n"
# What a write holds once it carries some of the answer itself (its time is the time to first
# token): an Anthropic content_block_delta (text, tool input, thinking), as the router relays
# it; the translator's OpenAI chunk of content or of a tool call (never its role-only first
# chunk, ``"delta":{"role"``, nor its finish chunk, ``"delta":{}``).
ANTHROPIC_TOKEN = b"content_block_delta"
OPENAI_TOKENS = (b'"delta":{"content":', b'"delta":{"tool_calls":')
# The Responses API's: a text or tool-call arguments delta event.
RESPONSES_TOKENS = (
    b"event: response.output_text.delta",
    b"event: response.function_call_arguments.delta",
)
# Every Responses event has one data line (its JSON holds no raw newline), comments none: the
# count of this in what a stream was sent is the number of events it was sent.
RESPONSES_EVENT = b"\ndata: "

# An error as the stream's client reads it (an SSE error event in its API's format).
ErrorFrame = Callable[[ReplyError], bytes]
# What a reply did to the write being collected: "more" (keep collecting), "final" (the write
# ends the stream), "held" (a final ReplyEnd that waits for its usage to be durable, not in the
# bytes), "ignored" (not a stream's reply).
Added = Literal["more", "final", "held", "ignored"]


@dataclass(slots=True)
class StreamState:
    """What a stream knows of what it wrote (its exchange knows what it heard: exchange.py)."""

    complete: bool = False  # its final event is durable and goes out with the last write
    events: int = 0  # Responses events written (their sequence numbers): counted for that API
    # The error its error event carried (the request log's error type and reason).
    error: ReplyError | None = None


def has_token(fmt: Format, data: bytes) -> bool:
    """Whether ``data``, written to a stream, carries some of the answer (not only its start,
    pings or its end)."""
    if fmt == "openai":
        return OPENAI_TOKENS[0] in data or OPENAI_TOKENS[1] in data
    if fmt == "responses":
        return RESPONSES_TOKENS[0] in data or RESPONSES_TOKENS[1] in data
    return ANTHROPIC_TOKEN in data


def ping_for(fmt: Format) -> bytes:
    """A keep-alive: Anthropic's ping event, or an SSE comment for the OpenAI APIs."""
    return ANTHROPIC_PING if fmt == "anthropic" else OPENAI_PING


def count_events(state: StreamState, fmt: Format, data: bytes) -> None:
    """Count the Responses events in ``data``, about to be written (nothing for other APIs)."""
    if fmt == "responses":
        state.events += data.count(RESPONSES_EVENT)


def add_reply(
    state: StreamState, parts: list[bytes], reply: envelopes.Reply, error_frame: ErrorFrame
) -> Added:
    """Append what ``reply`` writes to ``parts`` (its number was checked: exchange.py)."""
    match reply:
        case ReplyChunk():
            parts.append(reply.data)
        case Heartbeat():
            pass  # its holder is alive: counted as heard by the caller
        case ReplyHead():
            parts.append(reply.data)  # a stream committed before its head
        case ReplyEnd():
            if reply.usage:
                return "held"
            parts.append(reply.data)
            state.complete = True  # durable already (held by the router)
            return "final"
        case ReplyError():
            parts.append(error_frame(reply))
            return "final"
        case _:
            return "ignored"
    return "more"


def add_lost(parts: list[bytes], error_frame: ErrorFrame, err: ReplyError) -> None:
    """Its holder fell silent (``OWNER_LOST``), or a message of it was lost on the way
    (``PART_LOST``: an error, never a complete answer with a piece missing): the error event
    ends the write, and the stream."""
    parts.append(error_frame(err))


def next_write(parts: list[bytes], ping: bool, fmt: Format) -> bytes:
    """The bytes of a write that does not end the stream: what was collected, else a ping when
    one is due (any write keeps the connection alive)."""
    if not parts:
        return ping_for(fmt) if ping else b""
    return parts[0] if len(parts) == 1 else b"".join(parts)
