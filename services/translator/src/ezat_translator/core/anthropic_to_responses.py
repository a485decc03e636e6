"""An Anthropic Messages response as an OpenAI Responses API ``response`` object
(docs/responses.md, "Response object and stream").

One output item per content block, in order, except that a run of consecutive ``text`` blocks
(Anthropic splits a cited answer into plain and cited blocks) is one ``message`` item with one
``output_text`` part, their texts joined (as OpenAI answers, and as Codex shows one message per
item); a ``tool_use`` block is a ``function_call`` item (``call_id`` = the tool_use id,
``arguments`` its input as JSON text), a ``thinking`` or ``redacted_thinking`` block a
``reasoning`` item with ``summary: []`` and, when the caller gives a ``seal``,
``encrypted_content`` = the sealed block (signature included). Thinking text is never
returned in clear. A web search (a ``server_tool_use`` block and its ``web_search_tool_result``)
is a ``web_search_call`` item whose ``id`` seals both blocks when the caller gives a ``seal``;
a text block's ``citations`` are ``url_citation`` annotations spanning that block's place in its
part's text (web_search.py).

``status`` is ``completed``, or ``incomplete`` with ``incomplete_details.reason`` when the finish
reason is ``length`` (``max_output_tokens``) or ``content_filter`` (finish.py). ``output_text`` is
not in the JSON: the openai SDK computes it from ``output``. The stream (responses_stream.py)
builds its items and its final response object with the functions of this module, so that the
streamed and the non-streamed answer are the same object.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
from ezat_common.schemas.anthropic import (
    RedactedThinkingBlock,
    ServerToolUseBlock,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    WebSearchToolResultBlock,
)
from msgspec import Struct, field

from ezat_translator.core.anthropic_answer import arguments_json, read_response, thinking_dict
from ezat_translator.core.finish import to_incomplete_reason
from ezat_translator.core.token_counts import TokenCounts
from ezat_translator.core.web_search import (
    ID_PREFIX,
    result_block,
    search_item,
    url_citations,
    use_block,
)

_encode = msgspec.json.Encoder().encode

# Seals the Anthropic blocks of one reasoning item into its ``encrypted_content`` (the caller
# binds the key and the tenant; this module never sees either).
Seal = Callable[[list[dict[str, Any]]], str]


class ResponseEcho(Struct, frozen=True, kw_only=True):
    """What the response object repeats of the request, as the client sent it (the SDK's
    ``Response`` requires ``tools``, ``tool_choice`` and ``parallel_tool_calls``)."""

    instructions: str | None = None
    max_output_tokens: int | None = None
    metadata: dict[str, str] = {}
    parallel_tool_calls: bool = True
    previous_response_id: str | None = None
    reasoning: dict[str, Any] | None = None
    store: bool = True
    temperature: float | None = None
    text: dict[str, Any] = field(default_factory=lambda: {"format": {"type": "text"}})
    tool_choice: Any = "auto"
    tools: list[dict[str, Any]] = []
    top_p: float | None = None
    truncation: str = "disabled"
    user: str | None = None


class ResponseMeta(Struct, frozen=True, kw_only=True):
    """The request's side of a response: its id, the model name sent, the time, the echo."""

    request_id: str
    response_model: str
    created_at: int
    # The request's uid (unique per request; the client may reuse its request id): the
    # response's id, under which it is stored, and its items'. Empty: the request id stands
    # in (tests).
    uid: str = ""
    echo: ResponseEcho = field(default_factory=ResponseEcho)
    # Flat tool name -> (namespace, name), for the tools of ``namespace`` tools (responses_tools).
    namespaced: dict[str, tuple[str, str]] = {}
    # The (flat) names of the freeform tools: their calls are custom_tool_call items.
    custom_tools: frozenset[str] = frozenset()

    def is_custom(self, name: str) -> bool:
        return name in self.custom_tools

    def call_item(self, call_id: str, name: str, arguments: str, status: str) -> dict[str, Any]:
        """A call as the client declared its tool: a custom tool's call with its one string
        (the tool's ``input`` parameter), in its namespace, if any."""
        if name in self.custom_tools:
            item = custom_call_item(call_id, name, custom_input(arguments), status)
        else:
            item = function_call_item(call_id, name, arguments, status)
        found = self.namespaced.get(name)
        if found is not None:
            item["namespace"], item["name"] = found
        return item

    @property
    def response_id(self) -> str:
        return f"resp_{self.uid or self.request_id}"

    def item_id(self, prefix: str, output_index: int) -> str:
        """The id of a message (``msg``) or reasoning (``rs``) item: stable per request."""
        return f"{prefix}_{self.uid or self.request_id}_{output_index}"


# ---- output items ---------------------------------------------------------------------------


def output_text_part(text: str, notes: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": notes or []}


def add_text(part: dict[str, Any], text: str, citations: list[Any] | None) -> None:
    """One text block appended to its message's ``output_text`` part: its citations span its
    place in the part's text (OpenAI answers a search with one message, one part)."""
    start = len(part["text"])
    part["text"] += text
    part["annotations"] += url_citations(citations, start, start + len(text))


def message_item(item_id: str, parts: list[dict[str, Any]], status: str) -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "message",
        "status": status,
        "role": "assistant",
        "content": parts,
    }


def custom_call_item(call_id: str, name: str, input: str, status: str) -> dict[str, Any]:
    return {
        "id": f"ctc_{call_id}",
        "type": "custom_tool_call",
        "status": status,
        "call_id": call_id,
        "name": name,
        "input": input,
    }


def custom_input(arguments: str) -> str:
    """A custom tool's text: the ``input`` string of the one-string tool it was sent as
    (responses_tools.CUSTOM_SCHEMA); anything else the model wrote, as it wrote it."""
    if not arguments:
        return ""
    try:
        value = msgspec.json.decode(arguments)
    except msgspec.DecodeError:
        return arguments
    text = value.get("input") if isinstance(value, dict) else None
    return text if isinstance(text, str) else arguments


def function_call_item(call_id: str, name: str, arguments: str, status: str) -> dict[str, Any]:
    return {
        "id": f"fc_{call_id}",
        "type": "function_call",
        "status": status,
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
    }


def web_search_item(
    fallback_id: str,
    use: ServerToolUseBlock | dict[str, Any],
    result: WebSearchToolResultBlock,
    seal: Seal | None = None,
) -> dict[str, Any]:
    """A search and its result as a ``web_search_call``; with ``seal``, its id seals both
    blocks (the client sends it back: web_search.py), else it is ``fallback_id``."""
    used = use if isinstance(use, dict) else use_block(use.id, use.name, use.input)
    found = result_block(result.tool_use_id, result.content)
    item_id = fallback_id if seal is None else ID_PREFIX + seal([used, found])
    return search_item(item_id, used, found)


def reasoning_item(
    item_id: str, block: dict[str, Any] | None = None, seal: Seal | None = None
) -> dict[str, Any]:
    """A reasoning item; with ``block`` and ``seal``, it carries the sealed block."""
    item: dict[str, Any] = {"id": item_id, "type": "reasoning", "summary": []}
    if block is not None and seal is not None:
        item["encrypted_content"] = seal([block])
    return item


# ---- the response object --------------------------------------------------------------------


def to_response_usage(counts: TokenCounts, thinking_chars: int) -> dict[str, Any]:
    """``usage``: all input, its cache read and write, the output and its reasoning share."""
    total_input = counts.all_input
    usage = {
        "input_tokens": total_input,
        "input_tokens_details": {
            "cached_tokens": counts.cache_read,
            "cache_write_tokens": counts.cache_write,
        },
        "output_tokens": counts.output_tokens,
        "output_tokens_details": {"reasoning_tokens": counts.reasoning(thinking_chars)},
        "total_tokens": total_input + counts.output_tokens,
    }
    if counts.cost_usd is not None:  # the answer's price (docs/billing.md, "Cost in the answer")
        usage["cost_usd"] = counts.cost_usd
    return usage


def response_object(
    meta: ResponseMeta,
    *,
    status: str,
    output: list[dict[str, Any]],
    usage: dict[str, Any] | None = None,
    incomplete_reason: str | None = None,
    error: dict[str, Any] | None = None,
) -> dict[str, Any]:
    echo = meta.echo
    return {
        "id": meta.response_id,
        "object": "response",
        "created_at": meta.created_at,
        "status": status,
        "error": error,
        "incomplete_details": (
            None if incomplete_reason is None else {"reason": incomplete_reason}
        ),
        "instructions": echo.instructions,
        "max_output_tokens": echo.max_output_tokens,
        "model": meta.response_model,
        "output": output,
        "parallel_tool_calls": echo.parallel_tool_calls,
        "previous_response_id": echo.previous_response_id,
        "reasoning": echo.reasoning,
        "store": echo.store,
        "temperature": echo.temperature,
        "text": echo.text,
        "tool_choice": echo.tool_choice,
        "tools": echo.tools,
        "top_p": echo.top_p,
        "truncation": echo.truncation,
        "usage": usage,
        "user": echo.user,
        "metadata": echo.metadata,
    }


def final_response(
    meta: ResponseMeta,
    output: list[dict[str, Any]],
    stop_reason: str | None,
    counts: TokenCounts,
    thinking_chars: int,
) -> dict[str, Any]:
    """The finished answer: ``completed``, or ``incomplete`` with its reason."""
    reason = to_incomplete_reason(stop_reason)
    return response_object(
        meta,
        status="completed" if reason is None else "incomplete",
        output=output,
        usage=to_response_usage(counts, thinking_chars),
        incomplete_reason=reason,
    )


def to_response(
    anthropic_body: bytes,
    meta: ResponseMeta,
    seal: Seal | None = None,
    cost_usd: float | None = None,
    search_seal: Seal | None = None,
) -> bytes:
    """The ``response`` JSON of a Messages response body; ``cost_usd``: the answer's price
    (the router's ``x-ezat-cost-usd``), when known. ``seal`` seals thinking, ``search_seal``
    (default ``seal``) the searches' ids."""
    search_seal = search_seal or seal
    content, stop_reason, usage = read_response(anthropic_body)
    output: list[dict[str, Any]] = []
    thinking_chars = 0
    searches: dict[str, ServerToolUseBlock] = {}  # server_tool_use id -> the block
    part: dict[str, Any] | None = None  # the output_text part of the current run of text blocks
    for block in content:
        n = len(output)
        if isinstance(block, TextBlock):
            if part is None:
                part = output_text_part("")
                output.append(message_item(meta.item_id("msg", n), [part], "completed"))
            add_text(part, block.text, block.citations)
            continue
        part = None  # any other block ends the message
        if isinstance(block, ServerToolUseBlock):
            searches[block.id] = block
        elif isinstance(block, WebSearchToolResultBlock):
            use = searches.pop(block.tool_use_id, None)
            if use is not None:
                output.append(web_search_item(meta.item_id("ws", n), use, block, search_seal))
        elif isinstance(block, ToolUseBlock):
            arguments = arguments_json(block.input)
            output.append(meta.call_item(block.id, block.name, arguments, "completed"))
        elif isinstance(block, ThinkingBlock | RedactedThinkingBlock):
            if isinstance(block, ThinkingBlock):
                thinking_chars += len(block.thinking)
            output.append(reasoning_item(meta.item_id("rs", n), thinking_dict(block), seal))
    counts = TokenCounts(cost_usd=cost_usd)
    counts.merge(usage)
    return _encode(final_response(meta, output, stop_reason, counts, thinking_chars))
