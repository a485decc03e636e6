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
from .responses import from_gateway_error

log = logging.getLogger("ezat.edge")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def errors_mw(request: web.Request, handler: Handler) -> web.StreamResponse:
    rid = request_id(request.headers.get("x-request-id"))
    request[RID] = rid
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
    rid = request[RID]
    fmt = api_format(request.path)
    if isinstance(exc, GatewayError):
        resp = from_gateway_error(fmt, rid, exc)
        if exc.status == 408:
            resp.force_close()  # the rest of the body may still be on its way
        return resp
    if isinstance(exc, web.HTTPException):
        if exc.status >= 400:
            message = refusal_message(exc.status, request.method, request.path, exc.reason)
            return from_gateway_error(fmt, rid, GatewayError(exc.status, message))
        raise exc
    if isinstance(exc, asyncio.IncompleteReadError):
        return from_gateway_error(fmt, rid, GatewayError(400, "request body: is incomplete"))
    if isinstance(exc, RequestPayloadError | http_exceptions.HttpProcessingError):
        # The body's framing was broken (bad chunked encoding, say); never its bytes.
        log.info("malformed request body: %s", type(exc).__name__)
        resp = from_gateway_error(fmt, rid, GatewayError(400, "request body: is malformed"))
        resp.force_close()
        return resp
    # Never aiohttp's text/plain 500: the client gets the error format of its API.
    log.exception("request failed")
    return from_gateway_error(fmt, rid, GatewayError(500, "internal error; retry"))


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
