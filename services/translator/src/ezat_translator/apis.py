"""The translator's table of APIs: one entry per API the gateway serves (Messages, Chat
Completions, Responses), each turning a client's body into the one ``Translated`` request the
path routes (app.py) and the ``Conversion`` its replies go through on their way back
(conversions.py; None: the Messages API, whose router replies go straight to the edge).

Everything else is the path's, the same for every API: the body's claim check, the image
downloads, the thinking restore a translation asks for (``Translated.restore_thinking``), the
route's publish, the errors. Adding an API is adding an entry here (docs/development.md).

``large``: the body is decoded (in pieces) and translated in a worker thread, not on the loop
(docs/reliability.md, "Large bodies").
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ezat_common import envelopes
from ezat_common.catalogue import Catalogue
from ezat_common.config import ModelConfig
from ezat_common.envelopes import Api

from . import metrics as m
from .conversions import ChatConversion, Conversion, ResponsesConversion
from .core.chat_stream import ChatStream
from .core.messages import Prepared, prepare_count, prepare_create
from .core.openai_request import Translation
from .core.openai_to_anthropic import ChatTranslation, to_messages_request
from .core.responses_to_anthropic import ResponsesTranslation
from .core.turns import ImageUrlPart
from .responses_requests import ResponsesRequests
from .thinking_store import ThinkingStore


@dataclass(slots=True)
class Translated:
    """A request of any API as the router takes it: the Messages body and what the route says
    about it."""

    model: ModelConfig
    response_model: str  # exactly what the client sent in "model"
    stream: bool
    # The Messages body to send as is; None: encode ``data`` once its images are in.
    body: bytes | None
    data: dict[str, Any] | None  # the body to download ``image_urls`` into (and restore into)
    image_urls: list[ImageUrlPart]
    session_key: str | None
    prefix_hash: str | None
    cache_ttl: str | None
    input_estimate: int | None = None  # count_tokens: the router's answer when none can count
    user_id: str | None = None  # ``metadata.user_id``, for the usage record's attribution
    # Put kept thinking back into ``data`` before it is encoded (Chat Completions only: the
    # other APIs carry their thinking in the request).
    restore_thinking: Callable[[], Awaitable[None]] | None = None


Result = tuple[Translated, Conversion | None]


@dataclass(slots=True)
class Later:
    """A translation that waits on a store or Redis first: the path runs ``finish`` in a task
    of its own, off the translate subscription (app.py, ``handle``)."""

    finish: Callable[[], Awaitable[Result]]


class Entry(Protocol):
    def translate_now(self, req: envelopes.ClientRequest, body: bytes) -> Result | Later:
        """A body under ``off_loop_bytes``, in the translate subscription's own callback: its
        translation if that waits on nothing (no store, no Redis), else the rest as a ``Later``.
        Decided on the decoded request, never on its bytes: a body the decoder reads
        differently from a byte search could otherwise hold the subscription."""
        ...

    async def translate(self, req: envelopes.ClientRequest, body: bytes, large: bool) -> Result: ...


class Messages:
    """The Messages API (create and count_tokens): its body is already the router's."""

    def __init__(self, catalogue: Catalogue) -> None:
        self.catalogue = catalogue

    def translate_now(self, req: envelopes.ClientRequest, body: bytes) -> Result:
        prepare = prepare_count if req.api == "count_tokens" else prepare_create
        return self._translated(req, prepare(body, self.catalogue, allowed=req.models))

    async def translate(self, req: envelopes.ClientRequest, body: bytes, large: bool) -> Result:
        if not large:
            return self.translate_now(req, body)
        prepare = prepare_count if req.api == "count_tokens" else prepare_create
        p = await asyncio.to_thread(
            prepare, body, self.catalogue, in_pieces=True, allowed=req.models
        )
        return self._translated(req, p)

    @staticmethod
    def _translated(req: envelopes.ClientRequest, p: Prepared) -> Result:
        tr = Translated(
            model=p.model,
            response_model=p.response_model,
            stream=p.stream,
            # With image URLs ``body`` is empty and ``data`` the request to download into.
            body=None if p.image_urls else p.body,
            data=p.data,
            image_urls=p.image_urls,
            session_key=req.session,
            prefix_hash=p.prefix_hash,
            cache_ttl=p.cache_ttl,
            input_estimate=p.input_estimate,
            user_id=p.user_id,
        )
        return tr, None


class Chat:
    """Chat Completions: thinking kept server-side (thinking_store.py) goes back into the
    tool-calling turns that need it."""

    def __init__(self, catalogue: Catalogue, thinking: ThinkingStore) -> None:
        self.catalogue = catalogue
        self.thinking = thinking

    def translate_now(self, req: envelopes.ClientRequest, body: bytes) -> Result:
        # The thinking store is read after, by ``Translated.restore_thinking``.
        return self._translated(req, m.REQUEST.run(self._translate, req, body, False))

    async def translate(self, req: envelopes.ClientRequest, body: bytes, large: bool) -> Result:
        if not large:
            return self.translate_now(req, body)
        ct = await m.REQUEST.run_off_loop(self._translate, req, body, True)
        return self._translated(req, ct)

    def _translate(self, req: envelopes.ClientRequest, body: bytes, large: bool) -> ChatTranslation:
        return to_messages_request(
            body,
            self.catalogue,
            session_header=req.session,
            cache_header=req.cache,
            in_pieces=large,
            allowed=req.models,
        )

    def _translated(self, req: envelopes.ClientRequest, ct: ChatTranslation) -> Result:
        created = int(time.time())
        stream = (
            ChatStream(
                request_id=req.request_id,
                response_model=ct.response_model,
                created=created,
                include_usage=ct.include_usage,
            )
            if ct.stream
            else None
        )
        conv = ChatConversion(
            req.request_id, ct.response_model, created, stream, self.thinking, req.key_id
        )
        restore = None
        if ct.thinking_requested and ct.tool_turns:
            restore = functools.partial(self.thinking.restore, req.key_id, ct)
        return of_openai(ct, restore), conv


class Responses:
    """The Responses API: ``previous_response_id`` from the response store, sealed reasoning
    (responses_requests.py)."""

    def __init__(self, requests: ResponsesRequests) -> None:
        self.requests = requests

    def translate_now(self, req: envelopes.ClientRequest, body: bytes) -> Result | Later:
        # ``previous_response_id`` and a stored turn wait on the response store.
        now = self.requests.translate_now(req, body)
        if callable(now):
            return Later(functools.partial(self._finish, now))
        tr, conv = now
        return of_openai(tr), conv

    async def translate(self, req: envelopes.ClientRequest, body: bytes, large: bool) -> Result:
        tr, conv = await self.requests.translate(req, body, large)
        return of_openai(tr), conv

    @staticmethod
    async def _finish(
        finish: Callable[[], Awaitable[tuple[ResponsesTranslation, ResponsesConversion]]],
    ) -> Result:
        tr, conv = await finish()
        return of_openai(tr), conv


def of_openai(tr: Translation, restore: Callable[[], Awaitable[None]] | None = None) -> Translated:
    """An OpenAI API's translation: its body is a dict, encoded once its images are in."""
    return Translated(
        model=tr.model,
        response_model=tr.response_model,
        stream=tr.stream,
        body=None,
        data=tr.body,
        image_urls=tr.image_urls,
        session_key=tr.session_key,
        prefix_hash=tr.prefix_hash,
        cache_ttl=tr.cache_ttl,
        restore_thinking=restore,
    )


def table(
    catalogue: Catalogue, thinking: ThinkingStore, responses: ResponsesRequests
) -> Mapping[Api, Entry]:
    """Every ``ClientRequest.api`` to its entry (count_tokens is the Messages API's too)."""
    messages = Messages(catalogue)
    return {
        "messages": messages,
        "count_tokens": messages,
        "chat": Chat(catalogue, thinking),
        "responses": Responses(responses),
    }
