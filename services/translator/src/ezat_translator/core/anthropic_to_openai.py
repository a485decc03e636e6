"""An Anthropic Messages response as an OpenAI ``chat.completion`` (docs/api.md, "Response").

One choice. ``content`` is the text blocks joined, or null when the answer is only tool calls;
``refusal`` and ``logprobs`` are always null; ``tool_calls`` is present only when the model called
a tool, each with its ``input`` as a JSON text; ``annotations`` only when the text cites a web
search: a ``url_citation`` per citation, spanning its text block's place in ``content``.
Thinking text is never returned: the blocks of a turn that called tools are handed back as
``ThinkingKept`` so that the caller can keep them for the next turn (Anthropic wants them back
with the tool results).
"""

from __future__ import annotations

from typing import Any

import msgspec
from ezat_common.schemas.anthropic import (
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
)
from ezat_common.schemas.openai import (
    ChatCompletion,
    CompletionChoice,
    CompletionFunction,
    CompletionMessage,
    CompletionToolCall,
)
from msgspec import Struct

from ezat_translator.core.anthropic_answer import arguments_json, read_response, thinking_dict
from ezat_translator.core.chat_usage import to_chat_usage
from ezat_translator.core.finish import to_finish_reason
from ezat_translator.core.token_counts import TokenCounts
from ezat_translator.core.web_search import chat_annotation, url_citations

_encode = msgspec.json.Encoder().encode


class ThinkingKept(Struct, frozen=True):
    """Thinking of an assistant turn that called tools, as Anthropic sent it."""

    tool_call_ids: list[str]  # the tool_use ids of the turn
    blocks: list[dict[str, Any]]  # thinking / redacted_thinking blocks, in order


def to_chat_completion(
    anthropic_body: bytes,
    *,
    request_id: str,
    response_model: str,
    created: int,
    cost_usd: float | None = None,
) -> tuple[bytes, ThinkingKept | None]:
    """The ``chat.completion`` JSON of a Messages response body, and the thinking to keep;
    ``cost_usd``: the answer's price (the router's ``x-ezat-cost-usd``), when known."""
    content, stop_reason, usage = read_response(anthropic_body)
    texts: list[str] = []
    calls: list[CompletionToolCall] = []
    thinking: list[dict[str, Any]] = []
    thinking_chars = 0
    notes: list[dict[str, Any]] = []
    at = 0  # where the block's text starts in content
    for block in content:
        if isinstance(block, TextBlock):
            texts.append(block.text)
            end = at + len(block.text)
            notes += [chat_annotation(a) for a in url_citations(block.citations, at, end)]
            at = end
        elif isinstance(block, ToolUseBlock):
            function = CompletionFunction(name=block.name, arguments=arguments_json(block.input))
            calls.append(CompletionToolCall(id=block.id, function=function))
        elif isinstance(block, ThinkingBlock | RedactedThinkingBlock):
            if isinstance(block, ThinkingBlock):
                thinking_chars += len(block.thinking)
            thinking.append(thinking_dict(block))
        # server_tool_use and web_search_tool_result blocks ran on the deployment's side.
    counts = TokenCounts(cost_usd=cost_usd)
    counts.merge(usage)
    message = CompletionMessage(
        role="assistant",
        content="".join(texts) if texts or not calls else None,
        refusal=None,
        tool_calls=calls or None,
        annotations=notes or None,
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
