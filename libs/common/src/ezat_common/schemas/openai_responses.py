"""OpenAI Responses requests (``POST /openai/v1/responses``) as the gateway reads them.

The request is decoded in two steps so that every refusal can name its place and say what to
send instead: ``ResponsesRequest`` keeps ``input`` items, ``tools`` and ``tool_choice`` as plain
JSON, and the translator converts each item by its ``type`` (a message item may leave ``type``
out) into the struct of that type below, and each content part likewise. Fields not declared are
ignored; ``null`` is read as "not sent".
"""

from __future__ import annotations

from typing import Any

from msgspec import Struct

# ---- input items --------------------------------------------------------------------------------


class TextPart(Struct, kw_only=True, frozen=True):
    """``input_text`` and ``output_text`` (whose ``annotations`` are ignored)."""

    text: str
    cache_control: dict[str, Any] | None = None


class ImagePart(Struct, kw_only=True, frozen=True):
    """``input_image``; ``detail`` is ignored."""

    image_url: str | None = None
    file_id: str | None = None
    cache_control: dict[str, Any] | None = None


class FilePart(Struct, kw_only=True, frozen=True):
    """``input_file``; ``filename`` is ignored."""

    file_data: str | None = None
    file_id: str | None = None
    file_url: str | None = None
    cache_control: dict[str, Any] | None = None


class MessageItem(Struct, kw_only=True, frozen=True):
    role: str
    content: str | list[dict[str, Any]]  # parts converted one by one, by their type


class FunctionCallItem(Struct, kw_only=True, frozen=True):
    call_id: str
    name: str
    arguments: str
    namespace: str | None = None  # its tool is in a ``namespace`` tool


class CustomToolCallItem(Struct, kw_only=True, frozen=True):
    call_id: str
    name: str
    input: str
    namespace: str | None = None


class NamespaceTool(Struct, kw_only=True, frozen=True):
    name: str
    tools: list[dict[str, Any]]
    description: str | None = None


class ToolOutputItem(Struct, kw_only=True, frozen=True):
    """``function_call_output`` and ``custom_tool_call_output``."""

    call_id: str
    output: str | list[dict[str, Any]]


class ReasoningItem(Struct, kw_only=True, frozen=True):
    """A reasoning item sent back; ``summary`` and ``content`` are ignored."""

    id: str | None = None
    encrypted_content: str | None = None


# ---- tools --------------------------------------------------------------------------------------


class FunctionTool(Struct, kw_only=True, frozen=True):
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None
    cache_control: dict[str, Any] | None = None


class CustomFormat(Struct, kw_only=True, frozen=True):
    type: str = "text"
    syntax: str | None = None
    definition: str | None = None


class CustomTool(Struct, kw_only=True, frozen=True):
    name: str
    description: str | None = None
    format: CustomFormat | None = None
    cache_control: dict[str, Any] | None = None


class NamedTool(Struct, kw_only=True, frozen=True):
    """``tool_choice`` ``{"type": "function" | "custom", "name": ...}``."""

    name: str


# ---- options ------------------------------------------------------------------------------------


class TextFormat(Struct, kw_only=True, frozen=True):
    type: str
    name: str | None = None
    schema: dict[str, Any] | None = None
    strict: bool | None = None


class TextOptions(Struct, kw_only=True, frozen=True):
    format: TextFormat | None = None  # ``verbosity`` is ignored


class ReasoningOptions(Struct, kw_only=True, frozen=True):
    effort: str | None = None
    summary: str | None = None  # accepted; no summaries are produced


class ResponsesRequest(Struct, kw_only=True, frozen=True):
    """``POST /openai/v1/responses``: the fields docs/responses.md describes."""

    model: str
    input: str | list[dict[str, Any]] | None = None
    instructions: str | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    max_output_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    text: TextOptions | None = None
    reasoning: ReasoningOptions | None = None
    prompt_cache_key: str | None = None
    stream: bool | None = None
    store: bool | None = None
    include: list[str] | None = None
    previous_response_id: str | None = None
    # Accepted and ignored, but typed so that a wrong type is named.
    metadata: dict[str, str] | None = None
    user: str | None = None
    safety_identifier: str | None = None
    service_tier: str | None = None
    truncation: str | None = None
    # Refused when set; typed loosely so that any value is named in the refusal.
    background: bool | None = None
    conversation: Any = None
    prompt: Any = None
    n: int | None = None
    top_logprobs: Any = None
