"""An OpenAI Responses request as an Anthropic Messages request (docs/responses.md, "Request").

The sibling of ``openai_to_anthropic`` (Chat Completions), with the same rules wherever the two
APIs overlap, taken from the modules both use: the output limit's default, the sampling rule,
structured output's ``additionalProperties`` rule, the reasoning-effort table, the session key,
automatic cache breakpoints, image and PDF parts. What is the Responses API's own: ``input``
items (``responses_items``), flat and ``custom`` tools (``responses_tools``), ``text.format``,
``reasoning.effort``, ``max_output_tokens``, and the refused fields below.

``to_messages_request`` decodes the body, refuses what has no equivalent (400 whose message starts
with the path of the field), drops what is ignored, and returns the Anthropic body without
``model`` together with what the router, the fetcher and the later response store need.

Pure: no I/O, no clock, no logging, no environment. Encrypted reasoning is opened by the
``open_reasoning`` hook the caller passes in (sealing is not part of this module).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import msgspec
from ezat_common.catalogue import Catalogue
from ezat_common.config import ModelConfig
from ezat_common.errors import invalid
from ezat_common.schemas.openai_responses import ResponsesRequest, TextOptions

from . import pieces
from .anthropic_to_responses import ResponseEcho
from .openai_output import to_schema_format, wants_schema
from .openai_reasoning import to_reasoning
from .openai_request import (
    Parts,
    Translation,
    decoded,
    refuse_n,
    session_key,
    to_max_tokens,
    to_sampling,
    translation_fields,
)
from .openai_tools import forces_tool
from .responses_items import OpenReasoning, to_conversation
from .responses_tools import custom_tool_names, to_tool_choice, to_tools

__all__ = [
    "OpenReasoning",
    "ResponsesTranslation",
    "decode_responses_request",
    "to_echo",
    "to_messages_request",
    "translate_request",
]

_decode_request = msgspec.json.Decoder(ResponsesRequest).decode
_encode = msgspec.json.Encoder().encode
_decode_item = msgspec.json.Decoder(dict[str, Any]).decode


class ResponsesTranslation(Translation, frozen=True, kw_only=True):
    store: bool  # as sent; the API's default is true
    include: list[str]  # as sent, e.g. "reasoning.encrypted_content"
    previous_response_id: str | None  # for the response store; the items are not read here
    custom_tools: list[str]  # names of the freeform tools: their calls are custom_tool_call items
    # With store: this request's own canonical turns, JSON (stored_turns): what its stored
    # response keeps, before the answer's turn. Encoded before the automatic cache breakpoints
    # are set on the body's blocks, which are these blocks.
    new_turns: bytes = b"[]"


def to_messages_request(
    body: bytes,
    catalogue: Catalogue,
    *,
    session_header: str | None,
    cache_header: str | None,
    open_reasoning: OpenReasoning | None = None,
) -> ResponsesTranslation:
    return translate_request(
        decode_responses_request(body),
        catalogue,
        session_header=session_header,
        cache_header=cache_header,
        open_reasoning=open_reasoning,
    )


def translate_request(
    req: ResponsesRequest,
    catalogue: Catalogue,
    *,
    session_header: str | None,
    cache_header: str | None,
    open_reasoning: OpenReasoning | None = None,
    earlier: list[dict[str, Any]] | None = None,
    open_stored: OpenReasoning | None = None,
    allowed: Collection[str] | None = None,
) -> ResponsesTranslation:
    """``req`` as a Messages request; ``earlier``: the canonical turns of the conversation its
    ``previous_response_id`` names (``stored_turns``), read before ``input``, their sealed
    thinking opened with ``open_stored``; ``allowed``: the canonical ids the key may use (None:
    all; docs/tenancy.md)."""
    model = catalogue.resolve_or_404(req.model, allowed, api="responses")
    refuse_unsupported(req)
    check_metadata(req.metadata)
    max_tokens = to_max_tokens([("max_output_tokens", req.max_output_tokens)], model)

    tools = to_tools(req.tools, model) if req.tools else []
    choice = to_tool_choice(req.tool_choice, req.parallel_tool_calls, tools) if tools else None
    reasoning = to_reasoning(
        req.reasoning.effort if req.reasoning else None,
        model,
        max_tokens=max_tokens,
        forced_tool=forces_tool(choice),
        param="reasoning.effort",
        limit_param="max_output_tokens",
    )
    conversation, new_turns = to_conversation(
        req.input,
        model,
        instructions=req.instructions,
        open_reasoning=open_reasoning,
        # Without the earlier turns a call may be in the response named, which is not read.
        check_calls=req.previous_response_id is None or earlier is not None,
        earlier=earlier,
        open_stored=open_stored,
        keep_turns=req.store is not False,
    )
    store = req.store is not False
    stored = _encode(new_turns) if store else b"[]"
    parts = Parts(
        max_tokens=max_tokens,
        tools=tools,
        choice=choice,
        reasoning=reasoning,
        output_format=to_text_format(req.text, model),
        sampling=to_sampling(req.temperature, req.top_p, model, reasoning),
        conversation=conversation,
        stop=[],
    )
    return ResponsesTranslation(
        response_model=req.model,
        stream=bool(req.stream),
        session_key=session_key(session_header, req.prompt_cache_key),
        store=store,
        new_turns=stored,
        include=list(req.include or []),
        previous_response_id=req.previous_response_id,
        custom_tools=custom_tool_names(req.tools),
        **translation_fields(
            parts,
            model,
            client_tool_cache=any(t.get("cache_control") is not None for t in req.tools or []),
            cache_header=cache_header,
        ),
    )


def decode_responses_request(body: bytes, in_pieces: bool = False) -> ResponsesRequest:
    """``in_pieces``: ``input`` one item at a time (a large body, pieces.py)."""
    if in_pieces:
        return pieces.decode_struct(body, _decode_request, "input", _decode_item)
    return decoded(body, _decode_request)


def to_echo(req: ResponsesRequest) -> ResponseEcho:
    """What the response object repeats of the request, as sent."""
    reasoning = None
    if req.reasoning is not None:
        reasoning = {"effort": req.reasoning.effort, "summary": req.reasoning.summary}
    text = {"format": {"type": "text"}}
    if req.text is not None and req.text.format is not None:
        text = {"format": msgspec.to_builtins(req.text.format)}
    return ResponseEcho(
        instructions=req.instructions,
        max_output_tokens=req.max_output_tokens,
        metadata=req.metadata or {},
        parallel_tool_calls=req.parallel_tool_calls is not False,
        previous_response_id=req.previous_response_id,
        reasoning=reasoning,
        store=req.store is not False,
        temperature=req.temperature,
        text=text,
        tool_choice=req.tool_choice if req.tool_choice is not None else "auto",
        tools=req.tools or [],
        top_p=req.top_p,
        truncation=req.truncation or "disabled",
        user=req.user,
    )


def refuse_unsupported(req: ResponsesRequest) -> None:
    """The fields that would change the answer and have no equivalent (docs/responses.md)."""
    refuse_n(req.n)
    if req.background:
        raise invalid(
            "background", "background responses are not supported; send false or leave it out"
        )
    if req.truncation == "auto":
        raise invalid(
            "truncation", 'automatic truncation is not supported; send "disabled" or leave it out'
        )
    if req.truncation not in (None, "disabled"):
        raise invalid("truncation", f'must be "disabled"; got {req.truncation!r}')
    if req.conversation is not None:
        raise invalid(
            "conversation",
            "conversations are not supported; send the conversation's items in input",
        )
    if req.prompt is not None:
        raise invalid("prompt", "prompt templates are not supported; send instructions and input")
    if req.top_logprobs is not None:
        raise invalid("top_logprobs", "log probabilities are not supported")


# OpenAI's own limits on ``metadata`` (its API reference: 16 pairs, keys up to 64 characters,
# values up to 512). The response object repeats it and nothing else reads it: unbounded, a 32 MB
# request made a 32 MB answer, held at the edge for as long as its client did not read it.
METADATA_PAIRS = 16
METADATA_KEY_CHARS = 64
METADATA_VALUE_CHARS = 512


def check_metadata(metadata: dict[str, str] | None) -> None:
    """A 400 naming ``metadata`` (or the key whose value is too long) past OpenAI's limits."""
    if not metadata:
        return
    if len(metadata) > METADATA_PAIRS:
        raise invalid(
            "metadata",
            f"at most {METADATA_PAIRS} key-value pairs are allowed; got {len(metadata)}: "
            "send fewer",
        )
    for key, value in metadata.items():
        if len(key) > METADATA_KEY_CHARS:
            raise invalid(
                "metadata",
                f"a key is longer than {METADATA_KEY_CHARS} characters "
                f"(`{key[:METADATA_KEY_CHARS]}...`, {len(key)}); shorten it",
            )
        if len(value) > METADATA_VALUE_CHARS:
            raise invalid(
                f"metadata.{key}",
                f"is longer than {METADATA_VALUE_CHARS} characters ({len(value)}); shorten it",
            )


def to_text_format(text: TextOptions | None, model: ModelConfig) -> dict[str, Any] | None:
    """``text.format`` as ``output_config.format``: ``json_schema`` under the chat API's rule."""
    fmt = text.format if text is not None else None
    if fmt is None or not wants_schema(fmt.type, "text.format.type"):
        return None
    return to_schema_format(fmt.schema, model, "text.format.schema", "text.format")
