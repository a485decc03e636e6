"""Model-name surgery on request and response JSON, touching as little as possible.

Requests: the translator sends the body *without* ``model``; the deployment's model name is
spliced in as the first member (``{"model":"X",`` + the rest of the body) without parsing the
body, which can be 32 MB of base64 images. Only the JSON prefix is precomputed per deployment.

Responses: the client must see the model name it sent. Only the one JSON document that names
the model is decoded and re-encoded (a non-streamed response, or the stream's message_start).
"""

from __future__ import annotations

from typing import Any

import msgspec
from ezat_common.config import DeploymentConfig
from ezat_common.schemas.anthropic import Usage

_encode = msgspec.json.encode
_WHITESPACE = b" \t\r\n"
# An empty object can only be this short; longer bodies are never stripped (that copies them).
_EMPTY_OBJECT_MAX = 64


class PayloadError(ValueError):
    """A body that is not the JSON object it must be."""


def upstream_model(dep: DeploymentConfig) -> str:
    """The name the deployment knows the model by: configured, or the id after its last "/"."""
    name: str = dep.upstream_model or dep.model.rsplit("/", 1)[-1]
    return name


def model_prefix(dep: DeploymentConfig) -> bytes:
    return b'{"model":' + _encode(upstream_model(dep))


def with_model(prefix: bytes, body: bytes) -> bytes:
    """``body`` (a JSON object without ``model``) with the model spliced in first."""
    if len(body) <= _EMPTY_OBJECT_MAX and b"".join(body.split()) == b"{}":
        return prefix + b"}"
    start = 0
    while start < len(body) and body[start] in _WHITESPACE:
        start += 1
    if body[start : start + 1] != b"{":
        raise PayloadError("the request body is not a JSON object")
    return b"".join((prefix, b",", memoryview(body)[start + 1 :]))


def message_start_frame(data: bytes, response_model: str) -> bytes:
    """The message_start event re-encoded with ``message.model`` set to the client's name."""
    event = msgspec.json.decode(data)
    message = event.get("message") if isinstance(event, dict) else None
    if not isinstance(message, dict):
        raise PayloadError("message_start without a message")
    message["model"] = response_model
    return b"event: message_start\ndata: " + _encode(event) + b"\n\n"


def with_response_model(
    document: dict[str, Any], response_model: str, cost_usd: float | None = None
) -> bytes:
    """A non-streamed response (``read_response``'s document) re-encoded with ``model`` set to
    the client's name and, given, ``usage.cost_usd``: the one JSON decode serves the rewrite, the
    usage and the stop reason."""
    document["model"] = response_model
    if cost_usd is not None:
        _with_cost(document, cost_usd)
    return _encode(document)


def message_delta_frame(data: bytes, cost_usd: float) -> bytes:
    """The held message_delta event (its JSON) with ``usage.cost_usd`` added (a few hundred
    bytes: the one event of a stream re-encoded for its cost)."""
    try:
        event = msgspec.json.decode(data)
    except msgspec.DecodeError:
        raise PayloadError("message_delta is not JSON") from None
    if not isinstance(event, dict):
        raise PayloadError("message_delta is not a JSON object")
    _with_cost(event, cost_usd)
    return b"event: message_delta\ndata: " + _encode(event) + b"\n\n"


def _with_cost(document: dict[str, Any], cost_usd: float) -> None:
    usage = document.get("usage")
    if not isinstance(usage, dict):
        usage = document["usage"] = {}
    usage["cost_usd"] = cost_usd


def read_response(data: bytes) -> tuple[dict[str, Any], Usage, list[Any]]:
    """A non-streamed response decoded once: the document, its usage and its content blocks."""
    try:
        document = msgspec.json.decode(data)
    except msgspec.DecodeError:
        raise PayloadError("the response is not JSON") from None
    if not isinstance(document, dict):
        raise PayloadError("the response is not a JSON object")
    try:
        usage = msgspec.convert(document.get("usage") or {}, Usage)
    except msgspec.ValidationError:
        raise PayloadError("the response's usage is malformed") from None
    content = document.get("content")
    return document, usage, content if isinstance(content, list) else []
