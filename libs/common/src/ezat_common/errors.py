"""The gateway's errors: one type and one renderer per public API (docs/openapi.yaml).

``GatewayError`` is the exception a service raises; it carries ``reply``, the ``ReplyError``
(envelopes.py) that crosses NATS to the edge, so a failure's fields become a reply in one place.
At the edge a renderer turns a ``ReplyError`` into what the client sees: ``ANTHROPIC``
(``{"type":"error","error":{"type","message"},"request_id"}`` with Anthropic's status codes) and
``OPENAI`` (``{"error":{"message","type","param","code"}}`` with the same statuses except that
529 becomes 503), each as an HTTP response or as the error event of a started stream, and
``RESPONSES`` (OpenAI's body; a started stream ends with ``response.failed``, docs/responses.md).
"""

from __future__ import annotations

import math
from typing import Literal, NamedTuple

import msgspec

from .envelopes import Api, ReplyError

Format = Literal["anthropic", "openai", "responses"]

STATUS_OF_TYPE: dict[str, int] = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}

TYPE_OF_STATUS: dict[int, str] = {v: k for k, v in STATUS_OF_TYPE.items()}


def type_for_status(status: int) -> str:
    if status in TYPE_OF_STATUS:
        return TYPE_OF_STATUS[status]
    if status == 503:
        return "overloaded_error"
    return "api_error" if status >= 500 else "invalid_request_error"


class GatewayError(Exception):
    """A failure the client must be told about; ``message`` says what to fix.

    The fields live in ``reply`` only; the attributes read them from there.
    """

    reply: ReplyError

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str | None = None,
        param: str | None = None,
        code: str | None = None,
        retry_after: float | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.reply = ReplyError(
            status=status,
            type=type or type_for_status(status),
            message=message,
            param=param,
            code=code,
            retry_after=retry_after,
            headers=dict(headers or {}),
        )

    @classmethod
    def from_reply(cls, reply: ReplyError) -> GatewayError:
        """The error a received reply stands for (``raise GatewayError.from_reply(reply)``)."""
        err = cls.__new__(cls)
        Exception.__init__(err, reply.message)
        err.reply = reply
        return err

    @property
    def status(self) -> int:
        return self.reply.status

    @property
    def type(self) -> str:
        return self.reply.type

    @property
    def message(self) -> str:
        return self.reply.message

    @property
    def param(self) -> str | None:
        return self.reply.param

    @property
    def code(self) -> str | None:
        return self.reply.code

    @property
    def retry_after(self) -> float | None:
        return self.reply.retry_after

    @property
    def headers(self) -> dict[str, str]:
        return self.reply.headers


def invalid(param: str, problem: str) -> GatewayError:
    """400 whose message starts with the path of the offending field."""
    return GatewayError(400, f"{param}: {problem}", param=param)


# Where each API lists the models the calling key may use: the unknown model's 404 points there,
# in the API's own terms, and never at the other API's list.
MODEL_LISTS: dict[Api, str] = {
    "messages": "GET /v1/models",
    "count_tokens": "GET /v1/models",
    "chat": "GET /openai/v1/models",
    "responses": "GET /openai/v1/models",
}


def model_not_found(name: str, api: Api) -> GatewayError:
    """The 404 of a model that does not exist or that the key may not use (the same answer, so
    that a key cannot tell them apart), pointing to ``api``'s own model list."""
    return GatewayError(
        404,
        f"The model `{name}` does not exist or you do not have access to it. "
        f"{MODEL_LISTS[api]} lists the models you can use.",
        param="model",
        code="model_not_found",
    )


# ---- Renderers --------------------------------------------------------------------------------


class HttpError(NamedTuple):
    """An error as an HTTP response (its content type is always JSON)."""

    status: int
    headers: dict[str, str]
    body: bytes


def retry_after_seconds(wait: float) -> int:
    """A wait as a client's ``retry-after`` says it: whole seconds, rounded up, at least 1."""
    return max(1, math.ceil(wait))


def http_headers(reply: ReplyError, base: dict[str, str] | None = None) -> dict[str, str]:
    """``base`` (the edge's own headers), overridden by the reply's, and ``retry-after``
    (``retry_after_seconds``) when the reply says when to come back: the same in both formats."""
    headers = {**(base or {}), **reply.headers}
    if reply.retry_after is not None:
        headers["retry-after"] = str(retry_after_seconds(reply.retry_after))
    return headers


class ErrorRenderer:
    """What a client of one API sees of a ``ReplyError``."""

    def status(self, reply: ReplyError) -> int:
        raise NotImplementedError

    def body(self, reply: ReplyError, request_id: str) -> bytes:
        raise NotImplementedError

    def event(self, reply: ReplyError, request_id: str, sent_events: int = 0) -> bytes:
        """The error event that ends a stream whose response has started (``sent_events``:
        how many events its client has been sent, for a format that numbers them)."""
        raise NotImplementedError

    def response(
        self, reply: ReplyError, request_id: str, headers: dict[str, str] | None = None
    ) -> HttpError:
        """The HTTP response; ``headers`` are the edge's, under the reply's own."""
        return HttpError(
            self.status(reply), http_headers(reply, headers), self.body(reply, request_id)
        )


class AnthropicRenderer(ErrorRenderer):
    def status(self, reply: ReplyError) -> int:
        return reply.status

    def body(self, reply: ReplyError, request_id: str) -> bytes:
        return anthropic_body(reply.type, reply.message, request_id)

    def event(self, reply: ReplyError, request_id: str, sent_events: int = 0) -> bytes:
        return anthropic_sse(reply.type, reply.message, request_id)


class OpenAIRenderer(ErrorRenderer):
    def status(self, reply: ReplyError) -> int:
        return openai_status(reply.status)

    def body(self, reply: ReplyError, request_id: str) -> bytes:
        return openai_body(reply.status, reply.message, reply.param, reply.code)

    def event(self, reply: ReplyError, request_id: str, sent_events: int = 0) -> bytes:
        # A started stream's error chunk names no param and has the status's own code, as it
        # always has (and as the translator's chunks have, core/chat_stream.py).
        return openai_sse(reply.status, reply.message)


class ResponsesRenderer(OpenAIRenderer):
    def event(self, reply: ReplyError, request_id: str, sent_events: int = 0) -> bytes:
        # ``request_id`` is here the request's uid, which a response's id is made of (the
        # edge's relay passes it: ezat_edge/relay.py, ``_named``).
        return responses_failed_sse(reply.status, reply.message, request_id, sent_events)


ANTHROPIC = AnthropicRenderer()
OPENAI = OpenAIRenderer()
RESPONSES = ResponsesRenderer()
RENDERERS: dict[Format, ErrorRenderer] = {
    "anthropic": ANTHROPIC,
    "openai": OPENAI,
    "responses": RESPONSES,
}


# ---- Anthropic format -----------------------------------------------------------------------


def anthropic_body(type: str, message: str, request_id: str) -> bytes:
    return msgspec.json.encode(
        {"type": "error", "error": {"type": type, "message": message}, "request_id": request_id}
    )


def anthropic_sse(type: str, message: str, request_id: str) -> bytes:
    return b"event: error\ndata: " + anthropic_body(type, message, request_id) + b"\n\n"


# ---- OpenAI format --------------------------------------------------------------------------

_OPENAI_TYPE = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "invalid_request_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
    500: "server_error",
    503: "server_error",
    504: "server_error",
}

_OPENAI_CODE = {
    401: "invalid_api_key",
    413: "request_too_large",
    429: "rate_limit_exceeded",
    500: "internal_error",
    503: "overloaded",
    504: "timeout",
}


def openai_status(status: int) -> int:
    return 503 if status == 529 else status


def openai_error(
    status: int, message: str, param: str | None = None, code: str | None = None
) -> dict[str, object]:
    status = openai_status(status)
    kind = _OPENAI_TYPE.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {
        "message": message,
        "type": kind,
        "param": param,
        "code": code if code is not None else _OPENAI_CODE.get(status),
    }


def openai_body(
    status: int, message: str, param: str | None = None, code: str | None = None
) -> bytes:
    return msgspec.json.encode({"error": openai_error(status, message, param, code)})


def openai_sse(
    status: int, message: str, param: str | None = None, code: str | None = None
) -> bytes:
    return b"data: " + openai_body(status, message, param, code) + b"\n\ndata: [DONE]\n\n"


# ---- OpenAI Responses streams ---------------------------------------------------------------

# ResponseError.code of a failed response, by the status the client is told (after 529 → 503).
_FAILED_CODE = {400: "invalid_prompt", 429: "rate_limit_exceeded"}


def responses_failure(status: int, message: str) -> dict[str, object]:
    """The ``error`` of a ``response.failed`` response: the translator's (a deployment's error,
    a cut stream) and the edge's (billing, a lost holder) are the same shape."""
    told = openai_status(status)
    code = _FAILED_CODE.get(told, "server_error" if told >= 500 else "invalid_prompt")
    return {"code": code, "message": message, "type": openai_error(status, message)["type"]}


def responses_sse(kind: str, seq: int, fields: dict[str, object]) -> bytes:
    """One Responses stream event, numbered ``seq``."""
    payload = msgspec.json.encode({"type": kind, "sequence_number": seq, **fields})
    return b"event: " + kind.encode() + b"\ndata: " + payload + b"\n\n"


def responses_failed_sse(status: int, message: str, request_id: str, sent_events: int) -> bytes:
    """What the edge ends a started Responses stream with when the failure is its own: the
    ``response.failed`` event after the ``sent_events`` its client has (preceded by
    ``response.created`` when it has none, which every client reads first). Its ``output`` is
    null: the SDK's accumulator fills it from the items it was streamed."""
    head = {"id": f"resp_{request_id}", "object": "response"}
    out = b""
    if sent_events == 0:
        created = {**head, "status": "in_progress", "output": []}
        out = responses_sse("response.created", 0, {"response": created})
        sent_events = 1
    failed = {
        **head,
        "status": "failed",
        "error": responses_failure(status, message),
        "output": None,
        "usage": None,
    }
    return out + responses_sse("response.failed", sent_events, {"response": failed})
