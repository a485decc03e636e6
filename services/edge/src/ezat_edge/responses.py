"""HTTP responses of the edge, in the error format of the API the client called: the renderers
of ezat_common.errors (one per API, docs/openapi.yaml) put into aiohttp responses."""

from __future__ import annotations

from aiohttp import web
from ezat_common import errors
from ezat_common.envelopes import ReplyError
from ezat_common.errors import Format

__all__ = [
    "JSON",
    "Format",
    "error_response",
    "from_gateway_error",
    "reply_frame",
    "reply_response",
    "stream_error_frame",
]

JSON = "application/json"


def reply_response(
    fmt: Format, rid: str, reply: ReplyError, headers: dict[str, str] | None = None
) -> web.Response:
    """``reply`` as the client's API shows it; ``headers`` (the edge's) under the reply's own."""
    status, all_headers, body = errors.RENDERERS[fmt].response(reply, rid, headers)
    return web.Response(status=status, body=body, content_type=JSON, headers=all_headers)


def from_gateway_error(fmt: Format, rid: str, err: errors.GatewayError) -> web.Response:
    """The response for an error raised while handling the request (app.py's middleware)."""
    return reply_response(fmt, rid, err.reply)


def error_response(
    fmt: Format,
    rid: str,
    status: int,
    type: str,
    message: str,
    *,
    headers: dict[str, str] | None = None,
) -> web.Response:
    """An error the edge itself words, named by its fields."""
    return reply_response(fmt, rid, ReplyError(status=status, type=type, message=message), headers)


def reply_frame(fmt: Format, rid: str, reply: ReplyError, sent_events: int = 0) -> bytes:
    """``reply`` as the error event that ends a started stream (after ``sent_events``, for the
    Responses API, which numbers its events)."""
    return errors.RENDERERS[fmt].event(reply, rid, sent_events)


def stream_error_frame(
    fmt: Format, rid: str, status: int, type: str, message: str, sent_events: int = 0
) -> bytes:
    reply = ReplyError(status=status, type=type, message=message)
    return reply_frame(fmt, rid, reply, sent_events)
