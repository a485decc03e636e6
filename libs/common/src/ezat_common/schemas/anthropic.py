"""Anthropic Messages: the response, its usage and every stream event, as msgspec structs.

Events are a tagged union on ``type`` with explicit tags, decoded by one decoder built once.
Fields the gateway does not read are not declared; msgspec skips them, and the raw bytes are what
gets relayed, so nothing is lost.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import Struct, field


class CacheCreation(Struct, kw_only=True):
    ephemeral_5m_input_tokens: int = 0
    ephemeral_1h_input_tokens: int = 0


class ServerToolUse(Struct, kw_only=True):
    """Requests of the server tools the upstream ran itself (priced per request: docs/billing.md,
    "Server tools"). None: this usage object does not say (a later one may)."""

    web_search_requests: int | None = None
    web_fetch_requests: int | None = None


class Usage(Struct, kw_only=True):
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_creation_input_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    cache_creation: CacheCreation | None = None
    server_tool_use: ServerToolUse | None = None
    # Not part of Anthropic's API; the bundled simulator reports it, real deployments do not.
    reasoning_tokens: int | None = None
    # Not part of Anthropic's API either: the gateway's price of the answer, in the final usage
    # (docs/billing.md, "Cost in the answer"); the translator carries it to the OpenAI APIs.
    cost_usd: float | None = None


# ---- content blocks -------------------------------------------------------------------------


class Block(Struct, tag_field="type", kw_only=True):
    pass


class TextBlock(Block, tag="text"):
    text: str = ""
    # A web search's sources the text cites (web_search_result_location objects), as sent.
    citations: list[Any] | None = None


class ThinkingBlock(Block, tag="thinking"):
    thinking: str = ""
    signature: str = ""


class RedactedThinkingBlock(Block, tag="redacted_thinking"):
    data: str = ""


class ToolUseBlock(Block, tag="tool_use"):
    id: str
    name: str
    input: Any = None


class ServerToolUseBlock(Block, tag="server_tool_use"):
    id: str = ""
    name: str = ""
    input: Any = None


class WebSearchToolResultBlock(Block, tag="web_search_tool_result"):
    """A web search's results (``content``: a list of web_search_result objects, each with its
    ``encrypted_content``, or one web_search_tool_result_error), as sent."""

    tool_use_id: str = ""
    content: Any = None


ContentBlock = (
    TextBlock
    | ThinkingBlock
    | RedactedThinkingBlock
    | ToolUseBlock
    | ServerToolUseBlock
    | WebSearchToolResultBlock
)


class MessageResponse(Struct, kw_only=True):
    id: str = ""
    type: str = "message"
    role: str = "assistant"
    model: str = ""
    content: list[ContentBlock] = []
    stop_reason: str | None = None
    stop_sequence: str | None = None
    usage: Usage = field(default_factory=Usage)


# ---- stream events --------------------------------------------------------------------------


class TextDelta(Struct, tag_field="type", tag="text_delta", kw_only=True):
    text: str


class InputJsonDelta(Struct, tag_field="type", tag="input_json_delta", kw_only=True):
    partial_json: str


class ThinkingDelta(Struct, tag_field="type", tag="thinking_delta", kw_only=True):
    thinking: str


class SignatureDelta(Struct, tag_field="type", tag="signature_delta", kw_only=True):
    signature: str


class CitationsDelta(Struct, tag_field="type", tag="citations_delta", kw_only=True):
    citation: Any = None


Delta = TextDelta | InputJsonDelta | ThinkingDelta | SignatureDelta | CitationsDelta


class MessageMeta(Struct, kw_only=True):
    id: str = ""
    model: str = ""
    usage: Usage = field(default_factory=Usage)


class StopInfo(Struct, kw_only=True):
    stop_reason: str | None = None
    stop_sequence: str | None = None


class ErrorInfo(Struct, kw_only=True):
    type: str = "api_error"
    message: str = ""


class StreamEvent(Struct, tag_field="type", kw_only=True):
    pass


class MessageStart(StreamEvent, tag="message_start"):
    message: MessageMeta


class ContentBlockStart(StreamEvent, tag="content_block_start"):
    index: int
    content_block: ContentBlock


class ContentBlockDelta(StreamEvent, tag="content_block_delta"):
    index: int
    delta: Delta


class ContentBlockStop(StreamEvent, tag="content_block_stop"):
    index: int


class MessageDelta(StreamEvent, tag="message_delta"):
    delta: StopInfo = field(default_factory=StopInfo)
    usage: Usage = field(default_factory=Usage)


class MessageStop(StreamEvent, tag="message_stop"):
    pass


class Ping(StreamEvent, tag="ping"):
    pass


class Error(StreamEvent, tag="error"):
    error: ErrorInfo = field(default_factory=ErrorInfo)


AnyEvent = (
    MessageStart
    | ContentBlockStart
    | ContentBlockDelta
    | ContentBlockStop
    | MessageDelta
    | MessageStop
    | Ping
    | Error
)

decode_event = msgspec.json.Decoder(AnyEvent).decode
decode_response = msgspec.json.Decoder(MessageResponse).decode


class ErrorBody(Struct, kw_only=True):
    """An Anthropic error response body (also what deployments send)."""

    type: str = "error"
    error: ErrorInfo = field(default_factory=ErrorInfo)
    request_id: str | None = None


decode_error_body = msgspec.json.Decoder(ErrorBody).decode
