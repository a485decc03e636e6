"""A client's JSON request body decoded, or the 400 that says why it cannot be.

Every refusal is located at ``request body``, as each client-facing 400 names what it is about and
says what to fix (README.md, API). Both translators decode through here, so an empty, malformed
or too deeply nested body reads the same whichever API the client speaks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import msgspec

from .errors import GatewayError

T = TypeVar("T")

EMPTY = "request body: is empty; send a JSON object"
TOO_DEEP = "request body: is nested too deeply"
NOT_AN_OBJECT = "request body: must be a JSON object"

_decode_any = msgspec.json.Decoder().decode


def decode_body(body: bytes, decode: Callable[[bytes], T]) -> T:
    """``decode(body)``, refusing an empty body, invalid JSON and nesting deeper than the decoder.

    A ``msgspec.ValidationError`` (JSON of the wrong shape) is left to the caller, which knows the
    client-facing name of the field it is about.
    """
    if not body.strip():
        raise GatewayError(400, EMPTY)
    try:
        return decode(body)
    except msgspec.ValidationError:
        raise
    except msgspec.DecodeError as exc:
        raise GatewayError(400, f"request body: is not valid JSON ({exc})") from None
    except RecursionError:
        raise GatewayError(400, TOO_DEEP) from None


def decode_object(body: bytes) -> dict[str, Any]:
    """The body as a JSON object, of any content."""
    data = decode_body(body, _decode_any)
    if not isinstance(data, dict):
        raise GatewayError(400, NOT_AN_OBJECT)
    return data
