"""An Anthropic Messages response as an OpenAI ``chat.completion`` (docs/api.md, "Response").

One choice. ``content`` is the text blocks joined, or null when the answer is only tool calls;
``refusal`` and ``logprobs`` are always null; ``tool_calls`` is present only when the model called
a tool, each with its ``input`` as a JSON text. Thinking text is never returned: the blocks of a
turn that called tools are handed back as ``ThinkingKept`` so that the caller can keep them for
the next turn (Anthropic wants them back with the tool results).
"""

from __future__ import annotations

from typing import Any

import msgspec
from ezat_common.schemas.anthropic import (
    ContentBlock,
    MessageResponse,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    Usage,
    decode_response,
)
from ezat_common.schemas.openai import (
    ChatCompletion,
    CompletionChoice,
    CompletionFunction,
    CompletionMessage,
    CompletionToolCall,
)
from msgspec import Struct

from ezat_translator.core.chat_usage import TokenCounts, to_chat_usage
from ezat_translator.core.finish import to_finish_reason

_encode = msgspec.json.Encoder().encode
_decode_block = msgspec.json.Decoder(ContentBlock).decode


class ThinkingKept(Struct, frozen=True):
    """Thinking of an assistant turn that called tools, as Anthropic sent it."""

    tool_call_ids: list[str]  # the tool_use ids of the turn
    blocks: list[dict[str, Any]]  # thinking / redacted_thinking blocks, in order


class _LenientResponse(Struct, kw_only=True):
    """The response with its blocks left raw, for bodies holding a block type not declared."""

    content: list[msgspec.Raw] = []
    stop_reason: str | None = None
    usage: Usage = msgspec.field(default_factory=Usage)


_decode_lenient = msgspec.json.Decoder(_LenientResponse).decode


def to_chat_completion(
    anthropic_body: bytes, *, request_id: str, response_model: str, created: int
) -> tuple[bytes, ThinkingKept | None]:
    """The ``chat.completion`` JSON of a Messages response body, and the thinking to keep."""
    content, stop_reason, usage = _read_response(anthropic_body)
    texts: list[str] = []
    calls: list[CompletionToolCall] = []
    thinking: list[dict[str, Any]] = []
    thinking_chars = 0
    for block in content:
        if isinstance(block, TextBlock):
            texts.append(block.text)
        elif isinstance(block, ToolUseBlock):
            arguments = _encode({} if block.input is None else block.input).decode()
            calls.append(
                CompletionToolCall(
                    id=block.id, function=CompletionFunction(name=block.name, arguments=arguments)
                )
            )
        elif isinstance(block, ThinkingBlock):
            thinking_chars += len(block.thinking)
            thinking.append(
                {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
            )
        elif isinstance(block, RedactedThinkingBlock):
            thinking.append({"type": "redacted_thinking", "data": block.data})
        # server_tool_use blocks ran on the deployment's side: not a call for the client.
    counts = TokenCounts()
    counts.merge(usage)
    message = CompletionMessage(
        role="assistant",
        content="".join(texts) if texts or not calls else None,
        refusal=None,
        tool_calls=calls or None,
    )
    completion = ChatCompletion(
        id=f"chatcmpl-{request_id}",
        created=created,
        model=response_model,
        choices=[CompletionChoice(message=message, finish_reason=to_finish_reason(stop_reason))],
        usage=to_chat_usage(counts, thinking_chars),
    )
    kept = None
    if calls and thinking:
        kept = ThinkingKept(tool_call_ids=[call.id for call in calls], blocks=thinking)
    return _encode(completion), kept


def _read_response(body: bytes) -> tuple[list[ContentBlock], str | None, Usage]:
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
