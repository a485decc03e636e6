"""The rules both OpenAI request translations share (Chat Completions in ``openai_to_anthropic``,
Responses in ``responses_to_anthropic``): what a translation carries, where a malformed field is
named, the output limit's default, the sampling rule, the session key, the system prompt, the
automatic cache breakpoints, and the Messages body assembled from the translated parts.

Pure: no I/O, no clock, no logging, no environment.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

import msgspec
from ezat_common.bodies import NOT_AN_OBJECT, decode_body
from ezat_common.config import ModelConfig
from ezat_common.errors import GatewayError, invalid
from ezat_common.located import split_location
from msgspec import Struct

from .messages import largest_cache_ttl, prefix_hash
from .openai_reasoning import Reasoning
from .turns import Conversation, ImageUrlPart

DEFAULT_MAX_TOKENS = 32_000
MAX_CACHE_KEY = 256
EPHEMERAL: dict[str, Any] = {"type": "ephemeral"}

T = TypeVar("T")

_MISSING = re.compile(r"^Object missing required field `(?P<field>[^`]+)`")


class Translation(Struct, frozen=True, kw_only=True):
    """What both translations hand to the router, the fetcher and the thinking store."""

    model: ModelConfig
    response_model: str  # exactly what the client sent in "model"
    stream: bool
    body: dict[
        str, Any
    ]  # the Anthropic Messages request without "model" and "stream" (the router writes both)
    session_key: str | None  # x-ezat-session wins over prompt_cache_key
    image_urls: list[ImageUrlPart]
    tool_turns: list[tuple[int, list[str]]]
    thinking_requested: bool
    prefix_hash: str
    cache_ttl: str | None


class Parts(Struct, frozen=True, kw_only=True):
    """The translated pieces of a request, from which ``to_anthropic_body`` assembles the body."""

    conversation: Conversation
    tools: list[dict[str, Any]]
    choice: dict[str, Any] | None
    reasoning: Reasoning
    output_format: dict[str, Any] | None
    sampling: dict[str, float]
    max_tokens: int
    stop: list[str]


def translation_fields(
    parts: Parts, model: ModelConfig, *, client_tool_cache: bool, cache_header: str | None
) -> dict[str, Any]:
    """The ``Translation`` fields that follow from the parts: the body (with automatic cache
    breakpoints unless the client placed its own or sent ``x-ezat-cache: off``), the image and
    tool positions, the affinity hash and the cache TTL."""
    client_cache = parts.conversation.client_cache or client_tool_cache
    auto_cache = (
        model.prompt_caching and not client_cache and (cache_header or "").strip().lower() != "off"
    )
    out = to_anthropic_body(parts, auto_cache)
    return {
        "model": model,
        "body": out,
        "image_urls": parts.conversation.image_urls,
        "tool_turns": parts.conversation.tool_turns,
        "thinking_requested": parts.reasoning.requested,
        "prefix_hash": prefix_hash(model.id, out),
        "cache_ttl": largest_cache_ttl(out) if model.prompt_caching else None,
    }


def to_anthropic_body(parts: Parts, auto_cache: bool) -> dict[str, Any]:
    """The Messages request body from the translated parts, in the order Anthropic documents them;
    with automatic caching, breakpoints on the last system block (or tool) and the newest
    message."""
    conversation = parts.conversation
    out: dict[str, Any] = {"max_tokens": parts.max_tokens}
    system = to_system(conversation, auto_cache)
    if system is not None:
        out["system"] = system
    out["messages"] = conversation.messages
    if parts.tools:
        out["tools"] = parts.tools
        if auto_cache and system is None:
            parts.tools[-1]["cache_control"] = dict(EPHEMERAL)
    if parts.choice is not None:
        out["tool_choice"] = parts.choice
    if parts.reasoning.thinking is not None:
        out["thinking"] = parts.reasoning.thinking
    output_config: dict[str, Any] = {}
    if parts.reasoning.effort is not None:
        output_config["effort"] = parts.reasoning.effort
    if parts.output_format is not None:
        output_config["format"] = parts.output_format
    if output_config:
        out["output_config"] = output_config
    out.update(parts.sampling)
    if parts.stop:
        out["stop_sequences"] = parts.stop
    if auto_cache:
        mark_newest_message(conversation.messages)
    collapse_single_texts(conversation.messages)
    return out


# ---- decoding -------------------------------------------------------------------------------


def decoded(body: bytes, decode: Callable[[bytes], T]) -> T:
    """The request body decoded, or the 400 naming the field of the wrong shape."""
    try:
        return decode_body(body, decode)
    except msgspec.ValidationError as exc:
        raise located(str(exc)) from None


def converted(value: Any, kind: type[T], at: str) -> T:
    """A JSON value of the body (at the path ``at``) as ``kind``, or the 400 naming its field."""
    try:
        return msgspec.convert(value, kind)
    except msgspec.ValidationError as exc:
        raise located(str(exc), at) from None


def located(text: str, at: str = "") -> GatewayError:
    """A msgspec validation message as a 400 at the client-facing path (``messages[0].role``);
    ``at`` is the path of the value that was validated, when it is not the whole body."""
    where, problem = split_location(text)
    # msgspec names a value of a mapping `[...]`: the mapping is the field to name.
    path = join_path(at, (where or "").replace("[...]", ""))
    problem = problem.replace(" | null`", "`")  # null is accepted as "not sent" everywhere
    missing = _MISSING.match(problem)
    if missing:
        path = join_path(path, missing["field"])
        problem = "Field required"
    if not path:
        if problem.startswith("Expected `object`"):
            return GatewayError(400, NOT_AN_OBJECT)
        return GatewayError(400, f"request body: {problem}")
    return invalid(path, problem)


def join_path(base: str, tail: str) -> str:
    if not base or not tail:
        return base or tail
    return f"{base}{tail}" if tail.startswith("[") else f"{base}.{tail}"


# ---- fields ---------------------------------------------------------------------------------


def to_max_tokens(limits: list[tuple[str, int | None]], model: ModelConfig) -> int:
    """The first limit sent (in the order given, each at least 1), else 32,000 or the model's
    maximum output if lower."""
    for name, value in limits:
        if value is not None and value < 1:
            raise invalid(name, "must be an integer of at least 1")
    for _, value in limits:
        if value is not None:
            return int(value)
    return int(min(DEFAULT_MAX_TOKENS, model.max_output_tokens))


def to_sampling(
    temperature: float | None, top_p: float | None, model: ModelConfig, reasoning: Reasoning
) -> dict[str, float]:
    """temperature (capped at 1) and top_p (only below 1) for sampling models not thinking."""
    if temperature is not None and not 0 <= temperature <= 2:
        raise invalid("temperature", "must be between 0 and 2")
    if top_p is not None and not 0 <= top_p <= 1:
        raise invalid("top_p", "must be between 0 and 1")
    out: dict[str, float] = {}
    if not model.sampling or reasoning.requested:
        return out
    if temperature is not None:
        out["temperature"] = min(temperature, 1.0)
    if top_p is not None and top_p < 1:
        out["top_p"] = top_p
    return out


def refuse_n(n: int | None) -> None:
    if n is not None and n != 1:
        raise invalid("n", "only one choice is supported; send n: 1 or leave it out")


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
