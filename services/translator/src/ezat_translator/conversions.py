"""How each OpenAI API's answers are made from the router's Anthropic replies: one
``Conversion`` per request, made by its API's entry (apis.py) and used by converting.py for
every reply.

A conversion turns stream frames (``feed``), the final frame (``end``) and a whole body
(``body``) into its API's bytes. ``end`` and ``body`` also say what must be done *before* that
final answer is published, because the client may send its next turn as soon as it has it: the
Chat Completions path keeps the turn's thinking blocks in Redis (thinking_store.py), the
Responses path stores the response (docs/responses.md, "Stored responses"). Nothing else here
waits on I/O: ``feed`` runs inline, in arrival order.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

import msgspec
from ezat_common.envelopes import ReplyError
from ezat_common.pricing import COST_HEADER

from . import metrics as m
from .core.anthropic_to_openai import ThinkingKept, to_chat_completion
from .core.anthropic_to_responses import ResponseMeta, Seal, to_response
from .core.chat_stream import ChatStream
from .core.responses_stream import ResponsesStream
from .core.web_search import CHAT_PARAM, UNAVAILABLE_CODE, unavailable_message
from .thinking_store import ThinkingStore

log = logging.getLogger("ezat.translator.conversions")


def cost_of(headers: dict[str, str]) -> float | None:
    """The answer's price the router put in ``x-ezat-cost-usd`` (None: a router without it)."""
    text = headers.get(COST_HEADER)
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        return None


# Work to finish before the final answer is published (None: nothing to wait for).
Before = Callable[[], Awaitable[None]] | None
# Stores a finished response (its encoded object); the response store's, bound to the request.
StoreResponse = Callable[[bytes], Awaitable[None]]

_encode = msgspec.json.Encoder().encode


class Conversion(Protocol):
    def feed(self, data: bytes) -> bytes:
        """The client's bytes for these Anthropic stream frames (possibly b"")."""
        ...

    def end(self, data: bytes) -> tuple[bytes, Before]:
        """The stream's last bytes, from its final frames (the edge holds them until the
        request's usage is durable), and what to do before publishing them."""
        ...

    def body(self, data: bytes, cost_usd: float | None = None) -> tuple[bytes, Before]:
        """The client's JSON for an Anthropic Messages body (``cost_usd``: the answer's price,
        from the router's ``x-ezat-cost-usd``), and what to do before it."""
        ...

    def error(self, reply: ReplyError) -> ReplyError:
        """The router's error as this API's client should read it."""
        ...


def _search_refused(reply: ReplyError, param: str | None, model: str, remove: str) -> ReplyError:
    """The router's 400 for a web search no deployment of the model runs, naming ``param``
    (what the client sent: the router names the translated body's ``tools.N.type``), with its
    status and code kept; any other error as it is."""
    if reply.code != UNAVAILABLE_CODE or param is None:
        return reply
    message = unavailable_message(param, model, remove)
    return msgspec.structs.replace(reply, message=message, param=param)


@dataclass(slots=True)
class ChatConversion:
    """Chat Completions: chunks and ``chat.completion`` objects; thinking kept server-side."""

    request_id: str
    response_model: str
    created: int
    stream: ChatStream | None
    thinking: ThinkingStore
    key_id: str

    def feed(self, data: bytes) -> bytes:
        assert self.stream is not None
        return self.stream.feed(data)

    def end(self, data: bytes) -> tuple[bytes, Before]:
        assert self.stream is not None
        out = self.stream.feed(data)
        return out, self._keep(self.stream.kept_thinking)

    def body(self, data: bytes, cost_usd: float | None = None) -> tuple[bytes, Before]:
        out, kept = m.RESPONSE.run(
            to_chat_completion,
            data,
            request_id=self.request_id,
            response_model=self.response_model,
            created=self.created,
            cost_usd=cost_usd,
        )
        return out, self._keep(kept)

    def error(self, reply: ReplyError) -> ReplyError:
        # web_search_options is the only way a Chat request asks for a server tool.
        return _search_refused(reply, CHAT_PARAM, self.response_model, CHAT_PARAM)

    def _keep(self, kept: ThinkingKept | None) -> Before:
        if kept is None or not kept.blocks:
            return None
        store, key_id = self.thinking, self.key_id
        ids, blocks = kept.tool_call_ids, kept.blocks
        return lambda: store.keep(key_id, ids, blocks)


@dataclass(slots=True)
class ResponsesConversion:
    """The Responses API: its events and ``response`` objects; with ``store``, each finished
    response is stored before the client gets it (``previous_response_id`` may follow at once)."""

    meta: ResponseMeta
    seal: Seal | None
    stream: ResponsesStream | None
    store: StoreResponse | None
    # ``tools[i].type`` of the client's web search tool (None: it sent none): the router's
    # index counts the translated tools, which namespace tools expand.
    search_param: str | None = None
    search_seal: Seal | None = None  # seals web_search_call ids (None: ``seal``)

    def feed(self, data: bytes) -> bytes:
        assert self.stream is not None
        return self.stream.feed(data)

    def end(self, data: bytes) -> tuple[bytes, Before]:
        stream = self.stream
        assert stream is not None
        out = stream.feed(data)
        final = stream.final()
        if not final or stream.response is None:
            # No message_stop: the stream failed (feed wrote response.failed), nothing stored.
            return out or stream.finish(), None
        return out + final, self._store(_encode(stream.response))

    def body(self, data: bytes, cost_usd: float | None = None) -> tuple[bytes, Before]:
        out = m.RESPONSE.run(to_response, data, self.meta, self.seal, cost_usd, self.search_seal)
        return out, self._store(out)

    def error(self, reply: ReplyError) -> ReplyError:
        param = self.search_param
        return _search_refused(reply, param, self.meta.response_model, "the tool")

    def _store(self, response: bytes) -> Before:
        store = self.store
        if store is None:
            return None
        return lambda: store(response)
