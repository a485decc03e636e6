"""An OpenAI Chat Completions request as an Anthropic Messages request (docs/api.md, "OpenAI
compatibility").

``to_messages_request`` decodes the body with msgspec, refuses what has no equivalent (400 whose
message starts with the path of the field), drops what is ignored, and returns the Anthropic body
without ``model`` together with what the router, the fetcher and the thinking store need.

Pure: no I/O, no clock, no logging, no environment.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec
from ezat_common.bodies import NOT_AN_OBJECT, decode_body
from ezat_common.catalogue import Catalogue
from ezat_common.config import ModelConfig
from ezat_common.errors import GatewayError, invalid
from ezat_common.located import split_location
from ezat_common.schemas.openai import ChatRequest
from msgspec import Struct

from .messages import largest_cache_ttl, prefix_hash
from .openai_messages import Conversation, ImageUrlPart, to_conversation
from .openai_output import to_output_format
from .openai_reasoning import Reasoning, to_reasoning
from .openai_tools import forces_tool, to_tool_choice, to_tools

__all__ = ["ChatTranslation", "ImageUrlPart", "to_messages_request"]

DEFAULT_MAX_TOKENS = 32_000
MAX_CACHE_KEY = 256
EPHEMERAL: dict[str, Any] = {"type": "ephemeral"}

_decode_request = msgspec.json.Decoder(ChatRequest).decode
_MISSING = re.compile(r"^Object missing required field `(?P<field>[^`]+)`")


class ChatTranslation(Struct, frozen=True, kw_only=True):
    model: ModelConfig
    response_model: str  # exactly what the client sent in "model"
    stream: bool
    include_usage: bool  # stream_options.include_usage, as sent (also when not streaming)
    body: dict[
        str, Any
    ]  # the Anthropic Messages request without "model" and "stream" (the router writes both)
    session_key: str | None  # x-ezat-session wins over prompt_cache_key
    image_urls: list[ImageUrlPart]
    tool_turns: list[tuple[int, list[str]]]
    thinking_requested: bool
    prefix_hash: str
    cache_ttl: str | None


def to_messages_request(
    body: bytes, catalogue: Catalogue, *, session_header: str | None, cache_header: str | None
) -> ChatTranslation:
    req = decode_chat_request(body)
    model = catalogue.resolve_or_404(req.model)
    refuse_unsupported(req)
    max_tokens = output_limit(req, model)

    tools = to_tools(req.tools, keep_cache=model.prompt_caching) if req.tools else []
    choice = (
        to_tool_choice(req.tool_choice, req.parallel_tool_calls, [t["name"] for t in tools])
        if tools
        else None
    )
    reasoning = to_reasoning(
        req.reasoning_effort, model, max_tokens=max_tokens, forced_tool=forces_tool(choice)
    )
    output_format = to_output_format(req.response_format, model)
    sampling = to_sampling(req, model, reasoning)
    conversation = to_conversation(req.messages, model)
    client_cache = conversation.client_cache or any(t.cache_control for t in req.tools or [])
    auto_cache = (
        model.prompt_caching and not client_cache and (cache_header or "").strip().lower() != "off"
    )

    out = _anthropic_body(
        req, conversation, tools, choice, reasoning, output_format, sampling, max_tokens, auto_cache
    )
    stream = bool(req.stream)

    return ChatTranslation(
        model=model,
        response_model=req.model,
        stream=stream,
        include_usage=bool(req.stream_options and req.stream_options.include_usage),
        body=out,
        session_key=session_key(session_header, req.prompt_cache_key),
        image_urls=conversation.image_urls,
        tool_turns=conversation.tool_turns,
        thinking_requested=reasoning.requested,
        prefix_hash=prefix_hash(model.id, out),
        cache_ttl=largest_cache_ttl(out) if model.prompt_caching else None,
    )


def _anthropic_body(
    req: ChatRequest,
    conversation: Conversation,
    tools: list[dict[str, Any]],
    choice: dict[str, Any] | None,
    reasoning: Reasoning,
    output_format: dict[str, Any] | None,
    sampling: dict[str, Any],
    max_tokens: int,
    auto_cache: bool,
) -> dict[str, Any]:
    """The Messages request body from the translated parts, in the order Anthropic documents them;
    with automatic caching, breakpoints on the last system block (or tool) and the newest
    message."""
    out: dict[str, Any] = {"max_tokens": max_tokens}
    system = to_system(conversation, auto_cache)
    if system is not None:
        out["system"] = system
    out["messages"] = conversation.messages
    if tools:
        out["tools"] = tools
        if auto_cache and system is None:
            tools[-1]["cache_control"] = dict(EPHEMERAL)
    if choice is not None:
        out["tool_choice"] = choice
    if reasoning.thinking is not None:
        out["thinking"] = reasoning.thinking
    output_config: dict[str, Any] = {}
    if reasoning.effort is not None:
        output_config["effort"] = reasoning.effort
    if output_format is not None:
        output_config["format"] = output_format
    if output_config:
        out["output_config"] = output_config
    out.update(sampling)
    stop = to_stop_sequences(req.stop)
    if stop:
        out["stop_sequences"] = stop
    if auto_cache:
        mark_newest_message(conversation.messages)
    collapse_single_texts(conversation.messages)
    return out


# ---- decoding -------------------------------------------------------------------------------


def decode_chat_request(body: bytes) -> ChatRequest:
    try:
        return decode_body(body, _decode_request)
    except msgspec.ValidationError as exc:
        raise located(str(exc)) from None


def located(text: str) -> GatewayError:
    """A msgspec validation message as a 400 at the client-facing path (``messages[0].role``)."""
    at, problem = split_location(text)
    path = at or ""
    problem = problem.replace(" | null`", "`")  # null is accepted as "not sent" everywhere
    missing = _MISSING.match(problem)
    if missing:
        path = f"{path}.{missing['field']}" if path else missing["field"]
        problem = "Field required"
    if not path:
        if problem.startswith("Expected `object`"):
            return GatewayError(400, NOT_AN_OBJECT)
        return GatewayError(400, f"request body: {problem}")
    return invalid(path, problem)


# ---- fields ---------------------------------------------------------------------------------


def refuse_unsupported(req: ChatRequest) -> None:
    """The fields that would change the answer and have no equivalent (docs/api.md, "Refused")."""
    if req.n is not None and req.n != 1:
        raise invalid("n", "only one choice is supported; send n: 1 or leave it out")
    if req.logprobs:
        raise invalid("logprobs", "log probabilities are not supported; send false or leave it out")
    if req.top_logprobs is not None:
        raise invalid("top_logprobs", "log probabilities are not supported")
    if req.logit_bias:
        raise invalid("logit_bias", "logit bias is not supported")
    if req.modalities is not None and req.modalities != ["text"]:
        raise invalid("modalities", 'only ["text"] output is supported')
    if req.audio is not None:
        raise invalid("audio", "audio output is not supported")
    if req.web_search_options is not None:
        raise invalid("web_search_options", "web search is not supported")
    if req.functions is not None:
        raise invalid("functions", "the legacy functions API is not supported; use tools")
    if req.function_call is not None:
        raise invalid("function_call", "the legacy functions API is not supported; use tool_choice")


def output_limit(req: ChatRequest, model: ModelConfig) -> int:
    for name, value in (
        ("max_completion_tokens", req.max_completion_tokens),
        ("max_tokens", req.max_tokens),
    ):
        if value is not None and value < 1:
            raise invalid(name, "must be an integer of at least 1")
    if req.max_completion_tokens is not None:
        return int(req.max_completion_tokens)
    if req.max_tokens is not None:
        return int(req.max_tokens)
    return int(min(DEFAULT_MAX_TOKENS, model.max_output_tokens))


def to_sampling(req: ChatRequest, model: ModelConfig, reasoning: Reasoning) -> dict[str, float]:
    """temperature (capped at 1) and top_p (only below 1) for sampling models not thinking."""
    if req.temperature is not None and not 0 <= req.temperature <= 2:
        raise invalid("temperature", "must be between 0 and 2")
    if req.top_p is not None and not 0 <= req.top_p <= 1:
        raise invalid("top_p", "must be between 0 and 1")
    out: dict[str, float] = {}
    if not model.sampling or reasoning.requested:
        return out
    if req.temperature is not None:
        out["temperature"] = min(req.temperature, 1.0)
    if req.top_p is not None and req.top_p < 1:
        out["top_p"] = req.top_p
    return out


def to_stop_sequences(stop: str | list[str] | None) -> list[str]:
    values = [stop] if isinstance(stop, str) else list(stop or [])
    for k, value in enumerate(values):
        if not value.strip():
            path = "stop" if isinstance(stop, str) else f"stop[{k}]"
            raise invalid(path, "stop sequences must contain a non-whitespace character")
    return values


def session_key(header: str | None, prompt_cache_key: str | None) -> str | None:
    if prompt_cache_key is not None and len(prompt_cache_key) > MAX_CACHE_KEY:
        raise invalid("prompt_cache_key", f"must be at most {MAX_CACHE_KEY} characters")
    if header is not None and header.strip():
        return header
    return prompt_cache_key or None


# ---- system prompt and cache breakpoints ----------------------------------------------------


def to_system(conversation: Conversation, auto_cache: bool) -> str | list[dict[str, Any]] | None:
    parts = conversation.system
    if not parts:
        return None
    if any(part.cache_control is not None for part in parts):
        blocks: list[dict[str, Any]] = []
        for part in parts:
            block: dict[str, Any] = {"type": "text", "text": part.text}
            if part.cache_control is not None:
                block["cache_control"] = part.cache_control
            blocks.append(block)
        return blocks
    text = "\n\n".join(part.text for part in parts)
    if auto_cache:
        return [{"type": "text", "text": text, "cache_control": dict(EPHEMERAL)}]
    return text


def mark_newest_message(messages: list[dict[str, Any]]) -> None:
    messages[-1]["content"][-1]["cache_control"] = dict(EPHEMERAL)


def collapse_single_texts(messages: list[dict[str, Any]]) -> None:
    """A turn that is one plain text block is sent as a string, as clients usually write it."""
    for message in messages:
        content = message["content"]
        if len(content) == 1 and content[0]["type"] == "text" and len(content[0]) == 2:
            message["content"] = content[0]["text"]
