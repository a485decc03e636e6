"""OpenAI Chat Completions as the gateway reads it, as msgspec structs.

Request half: every field the public page describes is declared; any other field is skipped by
msgspec (ignored, never reaches the model). ``null`` is read as "not sent" everywhere, since many
clients send ``null`` for options they leave unset. Messages are a tagged union on ``role`` and
content parts a tagged union on ``type``, both with explicit tags.
"""

from __future__ import annotations

from typing import Any

from msgspec import Struct

# ---- request: content parts -------------------------------------------------------------------


class ContentPart(Struct, tag_field="type", kw_only=True, frozen=True):
    pass


class TextPart(ContentPart, tag="text", frozen=True):
    text: str
    cache_control: dict[str, Any] | None = None


class ImageUrl(Struct, kw_only=True, frozen=True):
    url: str  # ``detail`` is ignored, so not declared


class ImagePart(ContentPart, tag="image_url", frozen=True):
    image_url: ImageUrl
    cache_control: dict[str, Any] | None = None


class FileRef(Struct, kw_only=True, frozen=True):
    file_data: str | None = None
    file_id: str | None = None


class FilePart(ContentPart, tag="file", frozen=True):
    file: FileRef
    cache_control: dict[str, Any] | None = None


class AudioPart(ContentPart, tag="input_audio", frozen=True):
    input_audio: Any = None


class RefusalPart(ContentPart, tag="refusal", frozen=True):
    refusal: str = ""


UserPart = TextPart | ImagePart | FilePart | AudioPart
AssistantPart = TextPart | RefusalPart


# ---- request: messages ------------------------------------------------------------------------


class ChatMessage(Struct, tag_field="role", kw_only=True, frozen=True):
    pass


class SystemMessage(ChatMessage, tag="system", frozen=True):
    content: str | list[TextPart]


class DeveloperMessage(ChatMessage, tag="developer", frozen=True):
    content: str | list[TextPart]


class UserMessage(ChatMessage, tag="user", frozen=True):
    content: str | list[UserPart]


class AssistantFunction(Struct, kw_only=True, frozen=True):
    name: str
    arguments: str


class AssistantToolCall(Struct, kw_only=True, frozen=True):
    id: str
    function: AssistantFunction
    type: str = "function"


class AssistantMessage(ChatMessage, tag="assistant", frozen=True):
    content: str | list[AssistantPart] | None = None
    tool_calls: list[AssistantToolCall] | None = None
    # ``refusal``, ``name``, ``audio`` are ignored, so not declared.


class ToolMessage(ChatMessage, tag="tool", frozen=True):
    tool_call_id: str
    content: str | list[TextPart]


class FunctionMessage(ChatMessage, tag="function", frozen=True):
    """The legacy function role: declared only so that it can be refused by name."""


AnyMessage = (
    SystemMessage
    | DeveloperMessage
    | UserMessage
    | AssistantMessage
    | ToolMessage
    | FunctionMessage
)


# ---- request: tools, output, options ----------------------------------------------------------


class FunctionDef(Struct, kw_only=True, frozen=True):
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None


class FunctionTool(Struct, kw_only=True, frozen=True):
    function: FunctionDef
    type: str = "function"
    cache_control: dict[str, Any] | None = None


class NamedFunction(Struct, kw_only=True, frozen=True):
    name: str


class NamedToolChoice(Struct, kw_only=True, frozen=True):
    function: NamedFunction
    type: str = "function"


class JsonSchemaSpec(Struct, kw_only=True, frozen=True):
    schema: dict[str, Any] | None = None
    name: str | None = None


class ResponseFormat(Struct, kw_only=True, frozen=True):
    type: str
    json_schema: JsonSchemaSpec | None = None


class StreamOptions(Struct, kw_only=True, frozen=True):
    include_usage: bool | None = None


class ChatRequest(Struct, kw_only=True, frozen=True):
    """``POST /openai/v1/chat/completions``: the fields the public page describes."""

    model: str
    messages: list[AnyMessage]
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    max_completion_tokens: int | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop: str | list[str] | None = None
    tools: list[FunctionTool] | None = None
    tool_choice: str | NamedToolChoice | None = None
    parallel_tool_calls: bool | None = None
    reasoning_effort: str | None = None
    response_format: ResponseFormat | None = None
    prompt_cache_key: str | None = None
    # Refused when set (docs/api.md, "Refused"); typed loosely so that any value is named in the
    # refusal.
    n: int | None = None
    logprobs: bool | None = None
    top_logprobs: Any = None
    logit_bias: dict[str, Any] | None = None
    modalities: list[str] | None = None
    audio: Any = None
    web_search_options: Any = None
    functions: Any = None
    function_call: Any = None


# ---- response (written by core/anthropic_to_openai.py) ---------------------------------------
# Stream chunks are spliced from pre-encoded byte pieces in core/chat_stream.py; only what is
# encoded as a whole (the completion, the usage) is a struct. Field order is OpenAI's.


class PromptTokensDetails(Struct, kw_only=True):
    cached_tokens: int = 0
    cache_write_tokens: int = 0


class CompletionTokensDetails(Struct, kw_only=True):
    reasoning_tokens: int = 0


class CompletionUsage(Struct, kw_only=True, omit_defaults=True):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails
    completion_tokens_details: CompletionTokensDetails
    # The gateway's price of the answer (docs/billing.md, "Cost in the answer"); left out when
    # unknown (a router older than it).
    cost_usd: float | None = None


class CompletionFunction(Struct, kw_only=True):
    name: str
    arguments: str  # a JSON text, as OpenAI sends it


class CompletionToolCall(Struct, kw_only=True):
    id: str
    type: str = "function"
    function: CompletionFunction


class CompletionMessage(Struct, kw_only=True, omit_defaults=True):
    # Only tool_calls has a default: it is left out (not null) when no tool was called.
    role: str
    content: str | None
    refusal: None
    tool_calls: list[CompletionToolCall] | None = None
    # url_citation annotations of a web search (docs/api.md, "Web search"); left out without.
    annotations: list[dict[str, Any]] | None = None


class CompletionChoice(Struct, kw_only=True):
    index: int = 0
    message: CompletionMessage
    logprobs: None = None
    finish_reason: str


class ChatCompletion(Struct, kw_only=True):
    id: str
    object: str = "chat.completion"
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: CompletionUsage
