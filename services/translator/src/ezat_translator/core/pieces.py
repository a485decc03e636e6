"""A large request body decoded in pieces (docs/reliability.md, "Large bodies").

msgspec decodes a whole body in one C call that holds the GIL throughout: about 150-200 ms for a
31 MB body of many small items on a two-core machine. Run in a worker thread, that call still
stops the event loop for its whole length, and with it the heartbeats that tell the edge the
request is alive. Decoded here, the body's one big array (a conversation's ``messages`` or
``input``) costs one short call that only splits it into raw items (about 30 ms for 31 MB), then
one call per item: between two of them the interpreter hands the GIL to the event loop.

The result is the decoder's, the same as in one piece; a malformed item is named by its place in
the whole body (``input[3].content``), as in one piece.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import msgspec
from ezat_common.bodies import TOO_DEEP, decode_body
from ezat_common.errors import GatewayError

from .openai_request import decoded, located

T = TypeVar("T")

_fields = msgspec.json.Decoder(dict[str, msgspec.Raw]).decode
_items = msgspec.json.Decoder(list[msgspec.Raw]).decode
_any = msgspec.json.Decoder().decode
_encode = msgspec.json.Encoder().encode


def _top(body: bytes) -> dict[str, msgspec.Raw]:
    """The body's fields, each raw (one quick pass that builds none of them)."""
    try:
        return decode_body(body, _fields)
    except msgspec.ValidationError as exc:  # not an object
        raise located(str(exc)) from None


def _array(raw: msgspec.Raw | None) -> bool:
    # The first byte, read without copying the raw value (a Raw excludes leading whitespace).
    return raw is not None and len(raw) > 0 and memoryview(raw)[0] == ord("[")


def decode_items(raw: msgspec.Raw, field: str, decode_item: Callable[[bytes], T]) -> list[T]:
    """The JSON array ``raw`` (the body's ``field``), one item per decoder call."""
    out: list[T] = []
    append = out.append
    raws: list[msgspec.Raw | None] = _items(raw)  # type: ignore[assignment]
    try:
        for k, item in enumerate(raws):
            append(decode_item(item))  # type: ignore[arg-type]
            raws[k] = None  # each raw item goes once decoded: they never all sit beside the result
    except msgspec.ValidationError as exc:
        raise located(str(exc), f"{field}[{len(out)}]") from None
    except RecursionError:
        raise GatewayError(400, TOO_DEEP) from None
    return out


def decode_struct(
    body: bytes,
    decode: Callable[[bytes], T],
    field: str,
    decode_item: Callable[[bytes], Any],
) -> T:
    """``decode(body)`` (a Struct decoder), its array ``field`` decoded by ``decode_item``, one
    item at a time. The other fields are small in any body this is worth it for, and decoded
    together, by ``decode`` itself (so their checks are its own)."""
    fields = _top(body)
    raw = fields.get(field)
    if not _array(raw):
        # Not an array (a string input, null, missing): no pieces, and ``decode`` says what
        # is wrong with it.
        return decoded(body, decode)
    assert raw is not None
    items = decode_items(raw, field, decode_item)
    fields[field] = msgspec.Raw(b"[]")
    outer = decoded(_encode(fields), decode)
    return msgspec.structs.replace(outer, **{field: items})  # type: ignore[type-var]


def decode_object(body: bytes, field: str) -> dict[str, Any]:
    """The body as a JSON object (``ezat_common.bodies.decode_object``), its array ``field``
    decoded one item at a time."""
    out: dict[str, Any] = {}
    for name, raw in _top(body).items():  # in the body's order, which the deployment gets
        if name == field and _array(raw):
            out[name] = decode_items(raw, field, _any)
            continue
        try:
            out[name] = _any(raw)
        except RecursionError:
            raise GatewayError(400, TOO_DEEP) from None
    return out
