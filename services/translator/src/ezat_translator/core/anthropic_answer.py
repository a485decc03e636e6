"""What both OpenAI translations read of an Anthropic answer: the response body (leniently), a
stream's events (``AnthropicEvents``), tool arguments, and thinking blocks in the form Anthropic
wants them back (docs/api.md, "Response"; docs/responses.md).

A body holding a block type not declared in ``ezat_common.schemas.anthropic`` is not fatal: that
block is skipped. Thinking blocks are kept as Anthropic sent them, signature included, because
the next turn of a tool loop must send them back unchanged.
"""

from __future__ import annotations

from typing import Any

import msgspec
from ezat_common.schemas.anthropic import (
    AnyEvent,
    ContentBlock,
    MessageResponse,
    RedactedThinkingBlock,
    ThinkingBlock,
    Usage,
    decode_event,
    decode_response,
)
from ezat_common.sse import SseParser
from msgspec import Struct

_decode_block = msgspec.json.Decoder(ContentBlock).decode
_encode = msgspec.json.Encoder().encode


class _LenientResponse(Struct, kw_only=True):
    """The response with its blocks left raw, for bodies holding a block type not declared."""

    content: list[msgspec.Raw] = []
    stop_reason: str | None = None
    usage: Usage = msgspec.field(default_factory=Usage)


_decode_lenient = msgspec.json.Decoder(_LenientResponse).decode


def read_response(body: bytes) -> tuple[list[ContentBlock], str | None, Usage]:
    """Blocks, stop reason and usage; blocks of undeclared types are skipped, not fatal."""
    try:
        response: MessageResponse = decode_response(body)
        return response.content, response.stop_reason, response.usage
    except msgspec.ValidationError:
        lenient = _decode_lenient(body)
    blocks: list[ContentBlock] = []
    for raw in lenient.content:
        try:
            blocks.append(_decode_block(raw))
        except msgspec.ValidationError:
            continue
    return blocks, lenient.stop_reason, lenient.usage


def arguments_json(tool_input: Any) -> str:
    """A tool_use block's ``input`` as the JSON text OpenAI's ``arguments`` are (``{}`` if none)."""
    return _encode({} if tool_input is None else tool_input).decode()


def thinking_dict(block: ThinkingBlock | RedactedThinkingBlock) -> dict[str, Any]:
    """A thinking or redacted_thinking block as Anthropic wants it back."""
    if isinstance(block, ThinkingBlock):
        return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
    return {"type": "redacted_thinking", "data": block.data}


class ThinkingPieces:
    """One thinking block being streamed: its text and signature pieces."""

    __slots__ = ("signature", "text")

    def __init__(self, text: str, signature: str) -> None:
        self.text = [text] if text else []
        self.signature = [signature] if signature else []

    def to_block(self) -> dict[str, Any]:
        return thinking_dict(
            ThinkingBlock(thinking="".join(self.text), signature="".join(self.signature))
        )


class AnthropicEvents:
    """A stream's bytes in, as they arrive; its events out. Comment-only frames (keep-alives)
    are skipped; frames that do not decode as a known event are counted in ``ignored`` and
    skipped (an unknown type, a block or delta type not declared)."""

    __slots__ = ("_parser", "ignored")

    def __init__(self) -> None:
        self._parser = SseParser()
        self.ignored = 0

    def read(self, data: bytes) -> list[AnyEvent]:
        """The events these bytes complete (a list: cheaper per event than a generator)."""
        events: list[AnyEvent] = []
        for frame in self._parser.feed(data):
            if not frame.data:
                continue
            try:
                events.append(decode_event(frame.data))
            except msgspec.DecodeError:
                self.ignored += 1
        return events
