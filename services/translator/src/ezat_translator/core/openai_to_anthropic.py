"""An OpenAI Chat Completions request as an Anthropic Messages request (docs/api.md, "OpenAI
compatibility").

``to_messages_request`` decodes the body with msgspec, refuses what has no equivalent (400 whose
message starts with the path of the field), drops what is ignored, and returns the Anthropic body
without ``model`` together with what the router, the fetcher and the thinking store need.

Pure: no I/O, no clock, no logging, no environment.
"""

from __future__ import annotations

from collections.abc import Collection

import msgspec
from ezat_common.catalogue import Catalogue
from ezat_common.config import ModelConfig
from ezat_common.errors import invalid
from ezat_common.schemas.openai import AnyMessage, ChatRequest

from . import pieces
from .openai_messages import to_conversation
from .openai_output import to_output_format
from .openai_reasoning import to_reasoning
from .openai_request import (
    Parts,
    Translation,
    decoded,
    located,
    refuse_n,
    session_key,
    to_max_tokens,
    to_sampling,
    translation_fields,
)
from .openai_tools import forces_tool, to_tool_choice, to_tools
from .turns import ImageUrlPart
from .web_search import chat_tool

__all__ = ["ChatTranslation", "ImageUrlPart", "located", "to_messages_request"]

_decode_request = msgspec.json.Decoder(ChatRequest).decode
_decode_message = msgspec.json.Decoder(AnyMessage).decode


class ChatTranslation(Translation, frozen=True, kw_only=True):
    include_usage: bool  # stream_options.include_usage, as sent (also when not streaming)


def to_messages_request(
    body: bytes,
    catalogue: Catalogue,
    *,
    session_header: str | None,
    cache_header: str | None,
    in_pieces: bool = False,
    allowed: Collection[str] | None = None,
) -> ChatTranslation:
    """``in_pieces``: decode ``messages`` one at a time (a large body, pieces.py); ``allowed``:
    the canonical ids the key may use (None: all; docs/tenancy.md)."""
    req = decode_chat_request(body, in_pieces)
    model = catalogue.resolve_or_404(req.model, allowed, api="chat")
    refuse_unsupported(req)
    max_tokens = output_limit(req, model)

    tools = to_tools(req.tools, keep_cache=model.prompt_caching) if req.tools else []
    if req.web_search_options is not None:  # Anthropic's web search server tool (web_search.py)
        tools.append(chat_tool(req.web_search_options))
    choice = (
        to_tool_choice(req.tool_choice, req.parallel_tool_calls, [t["name"] for t in tools])
        if tools
        else None
    )
    reasoning = to_reasoning(
        req.reasoning_effort, model, max_tokens=max_tokens, forced_tool=forces_tool(choice)
    )
    parts = Parts(  # in the order of the checks: the first failing one is reported
        max_tokens=max_tokens,
        tools=tools,
        choice=choice,
        reasoning=reasoning,
        output_format=to_output_format(req.response_format, model),
        sampling=to_sampling(req.temperature, req.top_p, model, reasoning),
        conversation=to_conversation(req.messages, model),
        stop=to_stop_sequences(req.stop),
    )
    return ChatTranslation(
        response_model=req.model,
        stream=bool(req.stream),
        include_usage=bool(req.stream_options and req.stream_options.include_usage),
        session_key=session_key(session_header, req.prompt_cache_key),
        **translation_fields(
            parts,
            model,
            client_tool_cache=any(t.cache_control for t in req.tools or []),
            cache_header=cache_header,
        ),
    )


def decode_chat_request(body: bytes, in_pieces: bool = False) -> ChatRequest:
    if in_pieces:
        return pieces.decode_struct(body, _decode_request, "messages", _decode_message)
    return decoded(body, _decode_request)


def refuse_unsupported(req: ChatRequest) -> None:
    """The fields that would change the answer and have no equivalent (docs/api.md, "Refused")."""
    refuse_n(req.n)
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
    if req.functions is not None:
        raise invalid("functions", "the legacy functions API is not supported; use tools")
    if req.function_call is not None:
        raise invalid("function_call", "the legacy functions API is not supported; use tool_choice")


def output_limit(req: ChatRequest, model: ModelConfig) -> int:
    limits = [("max_completion_tokens", req.max_completion_tokens), ("max_tokens", req.max_tokens)]
    return to_max_tokens(limits, model)


def to_stop_sequences(stop: str | list[str] | None) -> list[str]:
    values = [stop] if isinstance(stop, str) else list(stop or [])
    for k, value in enumerate(values):
        if not value.strip():
            path = "stop" if isinstance(stop, str) else f"stop[{k}]"
            raise invalid(path, "stop sequences must contain a non-whitespace character")
    return values
