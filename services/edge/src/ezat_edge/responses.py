"""HTTP responses of the edge, in the error format of the API the client called."""

from __future__ import annotations

import math
from typing import Literal

from aiohttp import web
from ezat_common import errors

Format = Literal["anthropic", "openai"]

JSON = "application/json"


def error_response(
    fmt: Format,
    rid: str,
    status: int,
    type: str,
    message: str,
    *,
    param: str | None = None,
    code: str | None = None,
    retry_after: float | None = None,
    headers: dict[str, str] | None = None,
) -> web.Response:
    extra = dict(headers or {})
    if retry_after is not None:
        extra["retry-after"] = str(max(1, math.ceil(retry_after)))
    if fmt == "openai":
        body = errors.openai_body(status, message, param, code)
        status = errors.openai_status(status)
    else:
        body = errors.anthropic_body(type, message, rid)
    return web.Response(status=status, body=body, content_type=JSON, headers=extra)


def from_gateway_error(fmt: Format, rid: str, err: errors.GatewayError) -> web.Response:
    return error_response(
        fmt,
        rid,
        err.status,
        err.type,
        err.message,
        param=err.param,
        code=err.code,
        retry_after=err.retry_after,
        headers=err.headers,
    )


def stream_error_frame(fmt: Format, rid: str, status: int, type: str, message: str) -> bytes:
    if fmt == "openai":
        return errors.openai_sse(status, message)
    return errors.anthropic_sse(type, message, rid)
