"""The Responses API's request side (its entry in apis.py): a request's translation with the
``Conversion`` its replies go through, and the two things only this API has around a turn
(docs/responses.md): ``previous_response_id`` read from the response store, and reasoning
items whose ``encrypted_content`` carries the turn's thinking, sealed to the key's tenant.

The pure parts stay pure: ``responses_to_anthropic`` gets the stored items and an opener, and
``anthropic_to_responses`` a sealer, each already bound to the request's tenant here.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from ezat_common import envelopes
from ezat_common.config import DEFAULT_OFF_LOOP_BODY
from ezat_common.errors import GatewayError, model_not_found
from ezat_common.schemas.openai_responses import ResponsesRequest

from . import metrics as m
from .conversation_tokens import ConversationTokens
from .conversions import ResponsesConversion, StoreResponse
from .core.anthropic_to_responses import ResponseMeta, Seal
from .core.responses_stream import ResponsesStream
from .core.responses_to_anthropic import (
    OpenReasoning,
    ResponsesTranslation,
    decode_responses_request,
    to_echo,
    translate_request,
)
from .core.responses_tools import namespaced
from .core.web_search import responses_search_param
from .stored_responses import Earlier

ENCRYPTED_REASONING = "reasoning.encrypted_content"
# A request's translation and the conversion its replies go through.
Translated = tuple[ResponsesTranslation, ResponsesConversion]


class Sealer(Protocol):
    def seal(self, tenant: str, blocks: list[dict[str, Any]]) -> str: ...

    def open(
        self, tenant: str, blob: str, path: str, *, unknown_drops: bool = False
    ) -> list[dict[str, Any]] | None: ...


class Store(Protocol):
    async def earlier(self, key_id: str, response_id: str) -> Earlier:
        """The canonical turns that continue from ``response_id`` and their size (404/400/503
        as GatewayError)."""
        ...

    async def check(self, key_id: str, new_bytes: int) -> None:
        """Refuse (400) a turn past the per-response or per-key stored-bytes limit."""
        ...

    async def keep(
        self,
        key_id: str,
        response_id: str,
        previous_id: str | None,
        model: str,
        new_turns: bytes,
        response: bytes,
    ) -> None: ...


class ResponsesRequests:
    def __init__(
        self,
        catalogue: Any,
        sealer: Sealer | None = None,
        store: Store | None = None,
        tokens: ConversationTokens | None = None,
        off_loop_bytes: int = DEFAULT_OFF_LOOP_BODY,
    ) -> None:
        self.catalogue = catalogue
        # A stored conversation above it is decoded and translated in a worker thread.
        self.off_loop_bytes = off_loop_bytes
        self.sealer = sealer
        self.store = store  # None: store is accepted and nothing is kept (docs/responses.md)
        self.tokens = tokens  # None: a stored conversation is not counted in the key's tpm

    def translate_now(
        self, req: envelopes.ClientRequest, body: bytes
    ) -> Translated | Callable[[], Awaitable[Translated]]:
        """A small body's translation if it waits on nothing; else the rest of it, to await
        off the translate subscription: ``previous_response_id`` read from the store, a stored
        turn checked against the store's limits."""
        parsed = m.REQUEST.run(decode_responses_request, body)
        if parsed.previous_response_id is not None or (
            parsed.store is not False and self.store is not None
        ):
            return functools.partial(self._translate, req, parsed, len(body), False)
        tr = m.REQUEST.run(self._translation(req, parsed, None))
        return tr, self._conversion(req, parsed, tr)

    async def translate(
        self, req: envelopes.ClientRequest, body: bytes, large: bool = False
    ) -> Translated:
        """``large``: decode (in pieces) and translate in a worker thread, not on the loop
        (docs/reliability.md, "Large bodies")."""
        if large:
            parsed = await m.REQUEST.run_off_loop(decode_responses_request, body, True)
        else:
            parsed = m.REQUEST.run(decode_responses_request, body)
        return await self._translate(req, parsed, len(body), large)

    async def _translate(
        self, req: envelopes.ClientRequest, parsed: ResponsesRequest, size: int, large: bool
    ) -> Translated:
        earlier: Earlier | None = None
        if parsed.previous_response_id is not None:
            found = await self._earlier(req.key_id, parsed.previous_response_id)
            if not self.catalogue.permits(found.model, req.models):
                # Made with a model the key may no longer use: as if that model did not exist
                # (docs/tenancy.md, "How a request is authorized").
                raise model_not_found(found.model, "responses")
            if self.tokens is not None:
                # Sent upstream with the body, so counted like it (the edge saw the body only).
                await self.tokens.charge(
                    req.key_id, req.tpm, found.size, size, req.team_id, req.team_tpm
                )
            earlier = found
            # A small continuation of a large conversation is large work too: the stored turns
            # are decoded and translated with it, off the loop like a large body.
            large = large or found.size > self.off_loop_bytes
        translate = self._translation(req, parsed, earlier)
        tr = await m.REQUEST.run_off_loop(translate) if large else m.REQUEST.run(translate)
        if tr.store and self.store is not None:
            await self.store.check(req.key_id, len(tr.new_turns))
        return tr, self._conversion(req, parsed, tr)

    def _translation(
        self, req: envelopes.ClientRequest, parsed: ResponsesRequest, earlier: Earlier | None
    ) -> Callable[[], ResponsesTranslation]:
        return functools.partial(
            _translate,
            parsed,
            self.catalogue,
            session_header=req.session,
            cache_header=req.cache,
            open_reasoning=self._opener(req.key_id),
            earlier=earlier,
            open_stored=self._opener(req.key_id, stored=True),
            allowed=req.models,
        )

    def _conversion(
        self, req: envelopes.ClientRequest, parsed: ResponsesRequest, tr: ResponsesTranslation
    ) -> ResponsesConversion:
        meta = ResponseMeta(
            request_id=req.request_id,
            uid=req.uid,
            response_model=tr.response_model,
            created_at=int(time.time()),
            echo=to_echo(parsed),
            namespaced=namespaced(parsed.tools),
            custom_tools=frozenset(tr.custom_tools),
        )
        # Stored responses need the sealed thinking too: a continuation restores it from there.
        seal = None
        if tr.store or ENCRYPTED_REASONING in tr.include:
            seal = self._sealer(req.key_id)
        # A search's id is always sealed: a stateless client (store false, no include) sends it
        # back for its results to reach the next turn (docs/responses.md, "Web search").
        search_seal = self._sealer(req.key_id)
        stream = ResponsesStream(meta, seal, search_seal) if tr.stream else None
        keep = None
        if tr.store and self.store is not None:
            keep = self._keeper(req.key_id, meta.response_id, parsed.previous_response_id, tr)
        search = responses_search_param(parsed.tools)
        return ResponsesConversion(meta, seal, stream, keep, search, search_seal)

    async def _earlier(self, key_id: str, response_id: str) -> Earlier:
        if self.store is None:
            raise GatewayError(
                400,
                "previous_response_id: stored responses are not kept by this gateway; send the "
                "conversation's items in input",
                param="previous_response_id",
            )
        return await self.store.earlier(key_id, response_id)

    def _opener(self, tenant: str, *, stored: bool = False) -> OpenReasoning | None:
        sealer = self.sealer
        if sealer is None:
            return None

        def open_reasoning(blob: str, path: str) -> list[dict[str, Any]]:
            # None: sealed under a key retired since; the thinking is dropped, the turn runs.
            return sealer.open(tenant, blob, f"{path}.encrypted_content") or []

        def open_stored(blob: str, path: str) -> list[dict[str, Any]]:
            # The gateway stored it: under a key since removed it is dropped, never a 400.
            return sealer.open(tenant, blob, path, unknown_drops=True) or []

        return open_stored if stored else open_reasoning

    def _sealer(self, tenant: str) -> Seal | None:
        sealer = self.sealer
        if sealer is None:
            return None
        return lambda blocks: sealer.seal(tenant, blocks)

    def _keeper(
        self, key_id: str, response_id: str, previous_id: str | None, tr: ResponsesTranslation
    ) -> StoreResponse:
        store = self.store
        assert store is not None
        model, turns = tr.response_model, tr.new_turns
        return lambda response: store.keep(key_id, response_id, previous_id, model, turns, response)


def _translate(
    parsed: ResponsesRequest, catalogue: Any, *, earlier: Earlier | None, **kw: Any
) -> ResponsesTranslation:
    """``translate_request`` with the stored conversation decoded first, in the same call (on
    the loop or in the worker thread, as the request's size decides)."""
    turns = None if earlier is None else earlier.turns()
    return translate_request(parsed, catalogue, earlier=turns, **kw)
