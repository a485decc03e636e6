"""The edge's API endpoints: model calls (admission, key, budget, limits, body, then the relay),
the model lists and the caller's usage. Thin: the decisions are core/'s and the adapters'
(docs/architecture.md)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aiohttp import web
from ezat_common import bus, envelopes, tracing
from ezat_common.catalogue import Catalogue
from ezat_common.config import EdgeConfig
from ezat_common.db import ApiKey
from ezat_common.errors import GatewayError
from ezat_common.subjects import Subjects

from . import metrics as m
from . import spans
from .answers import write_within
from .auth import Authenticator
from .body_reader import BodyHold, read_limited
from .budgets import Budgets
from .call import Call
from .core.admission import Admission, overloaded
from .core.attribution import attribution
from .core.body_bytes import BodyBytes
from .core.hold import Worst
from .core.inputs import refused_body
from .core.model_access import ModelAccess
from .core.model_label import ModelLabels
from .core.routes import Format, api_format
from .ids import new_uid
from .limits import RateLimiter
from .middleware import error_answer
from .protocol import RID
from .relay import Relay
from .request_log import entry_of
from .responses import JSON
from .streams import SseResponse
from .usage import usage_query

if TYPE_CHECKING:
    from opentelemetry.trace import Span


@dataclass(frozen=True, slots=True)
class ModelLists:
    """The catalogue's model lists, encoded once: the public one, and what each allow-list
    lets a key see and name (core/model_access.py)."""

    access: ModelAccess
    public: bytes

    @classmethod
    def of(cls, catalogue: Catalogue) -> ModelLists:
        return cls(ModelAccess(catalogue), catalogue.public())


@dataclass(slots=True)
class Api:
    """Every endpoint a client calls with a key (and the public model list)."""

    cfg: EdgeConfig
    nc: bus.Client
    subjects: Subjects
    relay: Relay
    auth: Authenticator
    limiter: RateLimiter
    budgets: Budgets
    admission: Admission
    models: ModelLists
    model_labels: ModelLabels
    body_bytes: BodyBytes
    worst: Worst

    async def create_message(self, request: web.Request) -> web.StreamResponse:
        return await self._model_call(request, "messages", "anthropic")

    async def count_tokens(self, request: web.Request) -> web.StreamResponse:
        return await self._model_call(request, "count_tokens", "anthropic")

    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        return await self._model_call(request, "chat", "openai")

    async def create_response(self, request: web.Request) -> web.StreamResponse:
        return await self._model_call(request, "responses", "responses")

    async def _model_call(
        self, request: web.Request, api: envelopes.Api, fmt: Format
    ) -> web.StreamResponse:
        """The call's answer, counted (its errors answered here rather than by the middleware,
        so that every answer is: docs/observability.md, "Edge")."""
        meter = m.METERS[fmt]
        # What its NATS messages carry: the client's traceparent once validated (tracing off),
        # or this request's span (on); an invalid one is ignored (docs/observability.md).
        parent = tracing.valid(request.headers.get(tracing.HEADER))
        span = None
        if tracing.ENABLED:
            state = tracing.valid_state(",".join(request.headers.getall(tracing.STATE_HEADER, ())))
            span = spans.request(request, api, parent, state)
            parent = tracing.traceparent(span)
        try:
            resp = await self._admitted_call(request, api, fmt, meter, parent, span)
        except asyncio.CancelledError:
            meter.disconnects.inc()  # the client left (aiohttp cancels its handler)
            if span is not None:
                spans.left(span)
            raise
        except Exception as exc:
            resp = error_answer(request, exc)
        if isinstance(resp, SseResponse):
            sent = resp.sent
            entry = entry_of(request)
            if entry is not None:
                entry.stream = True
        else:
            sent = resp.content_length or 0
        meter.answered(resp.status, sent)
        if span is not None:
            spans.answered(span, resp.status)
        return resp

    async def _admitted_call(
        self,
        request: web.Request,
        api: envelopes.Api,
        fmt: Format,
        meter: m.ApiMeters,
        parent: str | None,
        span: Span | None,
    ) -> web.StreamResponse:
        if not self.admission.admit():
            m.OVERLOADED.inc()
            raise overloaded()
        hold = BodyHold(self.body_bytes)
        try:
            resp = await self._checked_call(request, api, fmt, meter, parent, span, hold)
            if not resp.prepared and isinstance(resp, web.Response):
                # A JSON answer: written here, within the grace, while it still counts in flight.
                cfg = self.cfg
                await write_within(request, resp, cfg.unread_answer_grace, cfg.body_min_rate)
            return resp
        finally:
            hold.release()  # whatever the way out: answered, refused, timed out, client gone
            self.admission.release()

    async def _checked_call(
        self,
        request: web.Request,
        api: envelopes.Api,
        fmt: Format,
        meter: m.ApiMeters,
        parent: str | None,
        span: Span | None,
        hold: BodyHold,
    ) -> web.StreamResponse:
        started = time.monotonic()
        received_at = time.time()
        rid = request[RID]
        key = await self.auth.authenticate(request)
        attributed = attribution(key, request.headers)  # a bad x-ezat-tags is a 400 first
        if api != "count_tokens" and self.budgets.limits(key):
            await self.budgets.check(self.nc, key)  # 403 before anything is sent upstream
        limit_headers = await self.limiter.check(key)
        cfg = self.cfg
        hold.key = key.id
        body = await read_limited(
            request, cfg.max_body_bytes, hold, cfg.body_timeout, cfg.body_min_rate
        )
        meter.request_bytes.observe(len(body))
        not_utf8 = refused_body(body)
        if not_utf8 is not None:
            raise not_utf8
        if (key.tpm is not None or key.team_tpm is not None) and api != "count_tokens":
            # Estimated input tokens (limits.py); count_tokens runs no model, so only its
            # request counts (RPM).
            limit_headers.update(await self.limiter.check_tokens(key, len(body), limit_headers))
        uid = new_uid()
        held: list[str] = []
        expiry = 0.0
        if api != "count_tokens" and self.budgets.limits(key):
            # Its worst case held on its budgets (budgets.py), after every other refusal.
            worst = self.worst.of(
                self.model_labels.of(body), body, request.headers.get("x-ezat-cache") is not None
            )
            expiry = time.time() + cfg.budget_hold_seconds
            held = await self.budgets.hold(self.nc, key, uid, worst, expiry)
        uids = [uid] if held else []  # the uids it is held under: each ends with the request
        free = False  # refused with a client error: no model ran, nothing will be charged
        try:  # from the hold on: whatever raises, the hold ends with the request
            env = self._envelope(request, rid, uid, api, key, received_at, attributed)
            call = Call(request, rid, fmt, env, limit_headers, started, parent)
            if held:
                self._hold_follows(call, uids, held, expiry)
            call.entry = entry_of(request)
            resp = await self._relayed(call, body, api, meter, span, started)
            free = not resp.prepared and 400 <= resp.status < 500
            return resp
        except GatewayError as exc:
            free = 400 <= exc.status < 500
            raise
        finally:
            self.budgets.ending(uids, held, free)

    def _hold_follows(self, call: Call, uids: list[str], held: list[str], expiry: float) -> None:
        """Keeps ``uids``, the uids ``call`` is published under (each may hold, so each ends): a
        request published again under a new uid moves its hold to it (budgets.moved), so that
        its row replaces the hold and is counted on every scope held (docs/billing.md)."""

        async def republished(first: str, new: str) -> None:
            uids.append(new)
            await self.budgets.moved(first, new, held, expiry)

        call.republished = republished

    def _envelope(
        self,
        request: web.Request,
        rid: str,
        uid: str,
        api: envelopes.Api,
        key: ApiKey,
        received_at: float,
        attributed: envelopes.Attribution,
    ) -> envelopes.ClientRequest:
        return envelopes.ClientRequest(
            request_id=rid,
            # The request's identity inside the gateway; ``rid`` may be chosen (and reused) by
            # clients, so it never identifies a request on its own.
            uid=uid,
            api=api,
            key_id=key.id,
            reply_to="",
            received_at=received_at,
            # Decodable (UTF-8; the other two ASCII): the middleware refused any other value.
            session=request.headers.get("x-ezat-session"),
            cache=request.headers.get("x-ezat-cache"),
            beta=request.headers.get("anthropic-beta"),
            tpm=key.tpm,
            team_id=key.team_id,
            team_tpm=key.team_tpm,
            models=self.models.access.of(key).ids,
            attribution=attributed,
        )

    async def _relayed(
        self,
        call: Call,
        body: bytes,
        api: envelopes.Api,
        meter: m.ApiMeters,
        span: Span | None,
        started: float,
    ) -> web.StreamResponse:
        label = self.model_labels.of(body)
        if call.entry is not None:
            call.entry.model = label
        if api == "count_tokens":  # no model runs: not in the latency series
            return await self.relay.run(call, body)
        if span is not None:
            span.set_attribute("gen_ai.request.model", label)
            call.trace_id = spans.trace_id(span)
        model = meter.model(label)
        try:
            resp = await self.relay.run(call, body)
        except Exception:
            model.observe(time.monotonic() - started, None, call.trace_id)
            raise
        first = call.first_token
        model.observe(time.monotonic() - started, first - started if first else None, call.trace_id)
        if call.entry is not None:
            call.entry.first_token = first
        return resp

    async def list_models(self, request: web.Request) -> web.Response:
        # Every endpoint a key calls counts against its rpm (docs/api.md, "Limits").
        key = await self.auth.authenticate(request)
        limit_headers = await self.limiter.check(key)
        access = self.models.access.of(key)  # only the models the key may use
        if api_format(request.path) != "openai":
            body = access.anthropic
        elif "client_version" in request.query:  # the Codex CLI (docs/responses.md, "Codex CLI")
            body = access.codex
        else:
            body = access.openai
        return web.Response(body=body, content_type=JSON, headers=limit_headers)

    async def public_models(self, request: web.Request) -> web.Response:
        return web.Response(body=self.models.public, content_type=JSON)

    async def usage(self, request: web.Request) -> web.Response:
        key = await self.auth.authenticate(request)
        await self.limiter.check(key)
        return await usage_query(self.nc, self.subjects, key, request)
