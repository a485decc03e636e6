"""Anthropic's error wire format, from Anthropic's API reference ("Errors"), not from the gateway.

The simulator stands in for Anthropic's API so that the gateway's own error code can be tested
against it: if both rendered errors with ``ezat_common.errors``, a mistake there would be repeated
here and pass unseen. So this module keeps its own copy of the documented shapes:

- the body ``{"type": "error", "error": {"type": ..., "message": ...}, "request_id": ...}``;
- a started stream's ``event: error`` carrying that body;
- the documented status -> ``error.type`` table. For a status the table does not list, the
  reference says a 4xx may carry ``invalid_request_error``; a 5xx gets ``api_error``, except 503,
  which the simulator reports as an overload (as a load balancer in front of the API would mean it).
"""

from __future__ import annotations

import msgspec

# Anthropic's documented HTTP errors: status -> ``error.type``.
ERROR_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}


def error_type(status: int) -> str:
    """The ``error.type`` Anthropic sends with ``status``."""
    if status in ERROR_TYPES:
        return ERROR_TYPES[status]
    if status == 503:
        return "overloaded_error"
    return "api_error" if status >= 500 else "invalid_request_error"


def error_body(type: str, message: str, request_id: str | None = None) -> bytes:
    """The JSON body of an error response; ``request_id`` is left out when ``None``."""
    body: dict[str, object] = {"type": "error", "error": {"type": type, "message": message}}
    if request_id is not None:
        body["request_id"] = request_id
    return msgspec.json.encode(body)


def error_event(type: str, message: str, request_id: str) -> bytes:
    """The ``event: error`` that ends a started stream."""
    return b"event: error\ndata: " + error_body(type, message, request_id) + b"\n\n"
