"""Error vocabulary of both public APIs, in one place (SPEC §1).

Anthropic endpoints: ``{"type":"error","error":{"type","message"},"request_id"}`` with Anthropic's
status codes. OpenAI endpoints: ``{"error":{"message","type","param","code"}}`` with the same
statuses except that 529 becomes 503.
"""

from __future__ import annotations

import msgspec

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
    """A failure the client must be told about; ``message`` says what to fix."""

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
        self.headers = headers or {}
        self.status = status
        self.type = type or type_for_status(status)
        self.message = message
        self.param = param
        self.code = code
        self.retry_after = retry_after


def invalid(param: str, problem: str) -> GatewayError:
    """400 whose message starts with the path of the offending field."""
    return GatewayError(400, f"{param}: {problem}", param=param)


def model_not_found(name: str) -> GatewayError:
    return GatewayError(
        404,
        f"The model `{name}` does not exist or you do not have access to it.",
        param="model",
        code="model_not_found",
    )


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
