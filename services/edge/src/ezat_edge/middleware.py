"""What every edge response goes through: the request id, and errors in the format of the API
the client called (never aiohttp's text/plain pages; docs/architecture.md), and the refusal of
a header the edge reads that it cannot decode (core/inputs.py)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from aiohttp import http_exceptions, web
from aiohttp.web_protocol import RequestPayloadError
from ezat_common import logs
from ezat_common.errors import GatewayError

from . import metrics as m
from .core.inputs import refused_header
from .core.routes import MODEL_CALLS, api_format, refusal_message
from .ids import request_id
from .protocol import RID, SERVER
from .request_log import begin, entry_of
from .responses import from_gateway_error

log = logging.getLogger("ezat.edge")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def errors_mw(request: web.Request, handler: Handler) -> web.StreamResponse:
    rid = request_id(request.headers.get("x-request-id"))
    request[RID] = rid
    begin(request, rid)
    token = logs.request_id.set(rid)
    try:
        # Before any handler: every endpoint refuses a header it reads that it cannot decode.
        refused = refused_header(request.headers.items())
        if refused is not None:
            return _refused_head(request, refused)
        return await handler(request)
    except Exception as exc:
        return error_answer(request, exc)
    finally:
        logs.request_id.reset(token)


def error_answer(request: web.Request, exc: Exception) -> web.StreamResponse:
    """The answer to what a handler raised, in the error format of the API the client called;
    called from the ``except`` that caught it (the model calls answer their own errors, to count
    them: handlers.py). An ``HTTPException`` below 400 (a redirect) is raised on."""
    err, close = _gateway_error(request, exc)
    resp = from_gateway_error(api_format(request.path), request[RID], err)
    if close:
        resp.force_close()
    entry = entry_of(request)
    if entry is not None:
        entry.failed(err.reply)
    return resp


def _gateway_error(request: web.Request, exc: Exception) -> tuple[GatewayError, bool]:
    """What the client is told of ``exc``, and whether its connection is closed after."""
    if isinstance(exc, GatewayError):
        return exc, exc.status == 408  # the rest of the body may still be on its way
    if isinstance(exc, web.HTTPException):
        if exc.status >= 400:
            message = refusal_message(exc.status, request.method, request.path, exc.reason)
            return GatewayError(exc.status, message), False
        raise exc
    if isinstance(exc, asyncio.IncompleteReadError):
        return GatewayError(400, "request body: is incomplete"), False
    if isinstance(exc, RequestPayloadError | http_exceptions.HttpProcessingError):
        # The body's framing was broken (bad chunked encoding, say); never its bytes.
        log.info("malformed request body: %s", type(exc).__name__)
        return GatewayError(400, "request body: is malformed"), True
    # Never aiohttp's text/plain 500: the client gets the error format of its API.
    log.exception("request failed")
    return GatewayError(500, "internal error; retry"), False


def _refused_head(request: web.Request, refused: GatewayError) -> web.StreamResponse:
    """The 400 of an undecodable header, counted as the model calls count their answers."""
    resp = error_answer(request, refused)
    if request.method == "POST" and request.path in MODEL_CALLS:
        m.METERS[api_format(request.path)].answered(resp.status, resp.content_length or 0)
    return resp


async def on_prepare(request: web.Request, response: web.StreamResponse) -> None:
    headers = response.headers
    headers["server"] = SERVER  # instead of aiohttp's Python and aiohttp versions
    rid = request.get(RID)
    if rid:
        headers["request-id"] = rid
        headers["x-request-id"] = rid
