"""What the edge refuses of a request's bytes before any handler reads them (docs/api.md,
"Request bytes"): a header it reads whose bytes it cannot decode, and a body that is not UTF-8.

aiohttp decodes header bytes as UTF-8 with ``surrogateescape``: a byte that is not UTF-8 arrives
as a lone surrogate, which can be neither hashed, logged, encoded for NATS nor sent upstream; the
official APIs refuse a body that is not UTF-8 (RFC 8259 JSON), whatever field holds the bytes.
"""

from __future__ import annotations

import codecs
from collections.abc import Iterable

from ezat_common.errors import GatewayError

# Headers the edge reads whose value must be ASCII (a key, the cache directive, beta names, the
# admin API's actor).
ASCII_HEADERS = frozenset(
    {"x-api-key", "authorization", "x-ezat-cache", "anthropic-beta", "x-ezat-actor"}
)
# Headers the edge reads that may hold any UTF-8, whose own grammar is then checked where they
# are used (an unusable request id or traceparent is replaced, not refused).
UTF8_HEADERS = frozenset({"x-request-id", "traceparent", "tracestate", "x-ezat-session", "accept"})
READ_HEADERS = ASCII_HEADERS | UTF8_HEADERS


def refused_header(headers: Iterable[tuple[str, str]]) -> GatewayError | None:
    """The 400 of the first header the edge reads whose value it cannot use, or None. One pass
    of ``str.isascii`` (C) over the values: nothing more for an all-ASCII head."""
    for name, value in headers:
        if value.isascii():
            continue
        lower = name.lower()
        if lower in ASCII_HEADERS:
            return GatewayError(400, f"{lower}: header must contain only ASCII characters")
        if lower in UTF8_HEADERS and not _utf8(value):
            return GatewayError(400, f"{lower}: header is not valid UTF-8")
    return None


def _utf8(value: str) -> bool:
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


# The piece a non-ASCII body is checked by: what the check allocates at once, however large
# the body (a whole-body decode would build a str of up to 4x a 32 MB body).
UTF8_PIECE = 1 << 20


def refused_body(body: bytes) -> GatewayError | None:
    """The 400 of a body that is not UTF-8 (the byte offset of its first bad byte), or None.
    An ASCII body is checked without a copy; any other is decoded in 1 MiB pieces (a C loop
    each), every piece's text dropped at once."""
    if body.isascii():
        return None
    decoder = codecs.getincrementaldecoder("utf-8")()
    view = memoryview(body)
    start, pending = 0, b""
    try:
        for start in range(0, len(body), UTF8_PIECE):
            pending = decoder.getstate()[0]
            decoder.decode(view[start : start + UTF8_PIECE])
        start, pending = len(body), decoder.getstate()[0]
        decoder.decode(b"", final=True)
    except UnicodeDecodeError as exc:
        # exc.start counts from the bytes held over from the piece before (a character cut
        # in two), then the piece.
        at = start - len(pending) + exc.start
        return GatewayError(
            400,
            f"the request body is not valid UTF-8 (invalid byte at offset {at}); "
            "send JSON encoded as UTF-8",
        )
    return None
