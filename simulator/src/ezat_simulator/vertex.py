"""The Google Vertex AI face: Claude's ``rawPredict`` / ``streamRawPredict`` / count-tokens routes
behind Google OAuth access tokens (simulator/README.md, "Vertex AI face").

Routes (``location`` is a region or ``global``; ``model`` a Vertex model id such as
``claude-sonnet-4-5@20250929``):

- ``POST /v1/projects/{p}/locations/{l}/publishers/anthropic/models/{model}:rawPredict``: JSON;
- ``...:streamRawPredict``: the same SSE stream as the Anthropic face (mid-stream errors are
  Anthropic's ``event: error``, as Vertex streams them);
- ``POST .../publishers/anthropic/models/count-tokens:rawPredict``: ``{"input_tokens": N}``;
- ``POST /token``: the OAuth token endpoint (``oauth.py``).

The body is the Messages body without ``model`` (the URL names it) and with
``"anthropic_version": "vertex-2023-10-16"`` (or a configured version); ``stream: true`` stays in
the body of a ``streamRawPredict``, as the ``anthropic`` SDK's ``AnthropicVertex`` sends it.
count-tokens is the exception: its body names the model (Google's count-tokens page says so and
the SDK sends it). Betas stay in the ``anthropic-beta`` header.

Errors: what Vertex itself refuses (credentials, the version, a ``model`` in the body, faults
and directive statuses) is Google's ``{"error": {"code", "message", "status"}}``; what the model
refuses (the Messages validation) is Anthropic's error body, which Vertex passes through.
Answers are the engine's, equal to the Anthropic face's for the same body and model.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec
from aiohttp import web

from . import engine
from .app import (
    HTML_PAGE,
    JSON,
    _error,
    _headers_then_nothing,
    _json_reply,
    _open,
    _stream,
)
from .cache import NO_CACHE
from .faults import Fault
from .instance import Simulator
from .oauth import CLOUD_PLATFORM, ISSUER, ServiceAccount, TokenIssuer, token
from .requestlog import RequestRecord
from .stream import hold
from .tokens import input_tokens, measure
from .validate import InvalidRequest, betas_of, validate_request

VERTEX_VERSION = "vertex-2023-10-16"
PREFIX = "/v1/projects/{project}/locations/{location}/publishers/anthropic/models/"
COUNT_TOKENS_MODEL = "count-tokens"
RAW, STREAM_RAW = "rawPredict", "streamRawPredict"
GOOGLE_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    413: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "NOT_IMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
_SIMULATED = {
    400: "Request contains an invalid argument. (simulated)",
    403: "Permission 'aiplatform.endpoints.predict' denied on resource (simulated).",
    429: "Quota exceeded for aiplatform.googleapis.com/online_prediction_requests_per_base_model "
    "with base model: anthropic-claude. Please submit a quota increase request. (simulated)",
    500: "Internal error encountered. (simulated)",
    503: "The service is currently unavailable. (simulated)",
    504: "The request timed out. Please try again. (simulated)",
}
UNAUTHENTICATED = (
    "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie "
    "or other valid authentication credential."
)
INSUFFICIENT_SCOPES = "Request had insufficient authentication scopes."
_decode = msgspec.json.decode
_encode = msgspec.json.encode


@dataclass(frozen=True, slots=True)
class VertexSettings:
    """The Vertex face's configuration (``--vertex-*`` flags, ``__main__.py``)."""

    service_accounts: tuple[ServiceAccount, ...] = ()
    token_lifetime: float = 3600.0
    anthropic_versions: frozenset[str] = field(default_factory=lambda: frozenset({VERTEX_VERSION}))


class VertexRefusal(Exception):
    """Something Vertex refuses before the model sees the request (Google's error shape)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


# ---- pure parts -----------------------------------------------------------------------------


def google_body(status: int, message: str) -> bytes:
    return _encode(
        {
            "error": {
                "code": status,
                "message": message,
                "status": GOOGLE_STATUS.get(status, "UNKNOWN"),
            }
        }
    )


def split_action(tail: str) -> tuple[str, str]:
    """``claude-x@2025:rawPredict`` -> (model, action); the action is after the last colon."""
    model, colon, action = tail.rpartition(":")
    if not colon or not model or action not in (RAW, STREAM_RAW):
        raise VertexRefusal(404, f"The requested URL path was not found: models/{tail}")
    return model, action


def to_messages_body(
    body: Any, model: str, action: str, versions: frozenset[str]
) -> dict[str, Any]:
    """The Anthropic Messages body the engine answers for a Vertex body (``VertexRefusal`` for
    what Vertex refuses). count-tokens keeps its own ``model``; the others take the URL's."""
    if not isinstance(body, Mapping):
        raise VertexRefusal(400, "Invalid JSON payload received. Expected an object.")
    version = body.get("anthropic_version")
    if version is None:
        raise VertexRefusal(400, "anthropic_version: Field required")
    if version not in versions:
        allowed = ", ".join(sorted(versions))
        raise VertexRefusal(400, f"anthropic_version: Input should be {allowed}, got {version!r}")
    req = {k: v for k, v in body.items() if k != "anthropic_version"}
    if model == COUNT_TOKENS_MODEL:
        if action != RAW:
            raise VertexRefusal(404, "count-tokens is served by :rawPredict only")
        if "model" not in req:
            raise VertexRefusal(400, "model: Field required (count-tokens names the model)")
        return req
    if "model" in req:
        # Stricter than confirmed Vertex behaviour on purpose: a body naming a model the URL
        # does not is a gateway bug worth failing loudly.
        raise VertexRefusal(400, "model: the model is named by the URL; the body must not name it")
    stream = req.get("stream")
    if action == STREAM_RAW and stream is not True:
        raise VertexRefusal(400, 'streamRawPredict expects "stream": true in the body')
    if action == RAW and stream is True:
        raise VertexRefusal(400, "rawPredict does not stream: use streamRawPredict")
    return {**req, "model": model}


def bearer(header: str | None) -> str | None:
    scheme, _, token = (header or "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


# ---- adapters -------------------------------------------------------------------------------


def _google_error(
    sim: Simulator,
    record: RequestRecord,
    status: int,
    message: str,
    retry_after: float | None = None,
) -> web.Response:
    headers = {"request-id": record.id}
    if status == 401:
        headers["www-authenticate"] = 'Bearer realm="https://accounts.google.com/"'
    if retry_after is not None:  # Vertex sends none by itself; a fault may ask for one
        headers["retry-after"] = f"{retry_after:g}"
    sim.log.close(record, "error", status, time.time())
    return web.Response(
        status=status, body=google_body(status, message), content_type=JSON, headers=headers
    )


def _simulated(status: int) -> str:
    return _SIMULATED.get(status, f"Simulated error (HTTP {status})")


def _refused_credentials(request: web.Request) -> tuple[int, str] | None:
    token = bearer(request.headers.get("authorization"))
    grant = None if token is None else request.app[ISSUER].lookup(token, time.time())
    if grant is None:
        return 401, UNAUTHENTICATED
    if CLOUD_PLATFORM not in grant.scopes:
        return 403, INSUFFICIENT_SCOPES
    return None


async def _read_body(request: web.Request, sim: Simulator, record: RequestRecord) -> Any:
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        return _google_error(sim, record, 413, "Request payload size exceeds the limit.")
    try:
        body = _decode(raw)
    except msgspec.DecodeError:
        return _google_error(sim, record, 400, "Invalid JSON payload received.")
    sim.log.keep_body(record, body, len(raw))  # as received: anthropic_version, no model
    return body


async def predict(request: web.Request) -> web.StreamResponse:
    sim, record, seq = _open(request)
    try:
        return await _predict(request, sim, record, seq)
    except asyncio.CancelledError:
        sim.log.close(record, "cancelled", 499, time.time())
        raise


async def _predict(
    request: web.Request, sim: Simulator, record: RequestRecord, seq: int
) -> web.StreamResponse:
    refused = _refused_credentials(request)
    if refused is not None:
        return _google_error(sim, record, *refused)
    body = await _read_body(request, sim, record)
    if isinstance(body, web.Response):
        return body
    versions = request.app[VERTEX_SETTINGS].anthropic_versions
    try:
        model, action = split_action(request.match_info["tail"])
        req = to_messages_body(body, model, action, versions)
    except VertexRefusal as exc:
        return _google_error(sim, record, exc.status, exc.message)
    betas = betas_of(request.headers.get("anthropic-beta"))
    if model == COUNT_TOKENS_MODEL:
        return _count_tokens(sim, record, req, betas)
    fault = sim.faults.take()
    if fault is not None and fault.delay_ms > 0:
        await asyncio.sleep(fault.delay_ms / 1000)
    if fault is not None and fault.status is not None:
        return _google_error(sim, record, fault.status, _simulated(fault.status), fault.retry_after)
    return await _answer(request, sim, record, seq, req, betas, fault)


def _count_tokens(
    sim: Simulator, record: RequestRecord, req: dict[str, Any], betas: tuple[str, ...]
) -> web.Response:
    try:
        validate_request(req, count_only=True, betas=betas)
        directives, _ = engine.read_directives(req)
    except InvalidRequest as exc:
        return _error(sim, record, 400, exc.message)
    if directives.status is not None:
        return _google_error(sim, record, directives.status, _simulated(directives.status))
    sim.log.close(record, "complete", 200, time.time())
    body = _encode({"input_tokens": input_tokens(req)})
    return web.Response(body=body, content_type=JSON, headers={"request-id": record.id})


async def _answer(
    request: web.Request,
    sim: Simulator,
    record: RequestRecord,
    seq: int,
    req: dict[str, Any],
    betas: tuple[str, ...],
    fault: Fault | None,
) -> web.StreamResponse:
    try:
        validate_request(req, betas=betas)
        directives, seed = engine.read_directives(req)
    except InvalidRequest as exc:
        return _error(sim, record, 400, exc.message)  # the model's 400, passed through
    if directives.status is not None:
        return _google_error(sim, record, directives.status, _simulated(directives.status))
    if directives.never_answer or (fault is not None and fault.never_answer):
        await hold()
    if directives.html or (fault is not None and fault.html):
        sim.log.close(record, "html", 200, time.time())
        return web.Response(body=HTML_PAGE, content_type="text/html", charset="utf-8")
    measured = measure(req, req["model"])
    cache = NO_CACHE
    if measured.boundaries:
        minimum = sim.min_cache_tokens(req["model"])
        cache = sim.cache.account(measured.boundaries, time.monotonic(), minimum)
    plan = engine.plan_reply(
        req, directives, seed, seq=seq, input_tokens=measured.input_tokens, cache=cache
    )
    record.message_id = plan.message_id
    timing = sim.timing(directives, fault)
    streaming = req.get("stream") is True
    if timing.stall_before_start:
        return await _headers_then_nothing(request, streaming)
    if streaming:
        return await _stream(request, sim, record, plan, timing)
    return await _json_reply(request, sim, record, plan, timing, _google_error)


VERTEX_SETTINGS = web.AppKey("vertex_settings", VertexSettings)


def add_vertex_face(app: web.Application, settings: VertexSettings) -> None:
    """Serve the Vertex routes and ``/token`` on ``app`` (``make_app`` calls it when configured)."""
    app[ISSUER] = TokenIssuer(settings.service_accounts, settings.token_lifetime)
    app[VERTEX_SETTINGS] = settings
    app.router.add_post(PREFIX + "{tail}", predict)
    app.router.add_post("/token", token)
