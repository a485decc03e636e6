"""What a file is, decided from its first bytes (never from a declared type or header).

A client or a server can label anything ``image/png``; the provider would reject what is not an
image and, worse, the gateway would forward arbitrary bytes. This is a security check, so the
translator (inline ``data:`` URLs) and the fetcher (downloaded URLs) read the magic bytes here,
through one function that cannot drift apart (docs/architecture.md). ``image_size`` reads an
image's dimensions from the same header, for the translator's token estimate (docs/api.md,
"count_tokens").
"""

from __future__ import annotations

JPEG = "image/jpeg"
PNG = "image/png"
GIF = "image/gif"
WEBP = "image/webp"
PDF = "application/pdf"

# In the order the refusals list them.
IMAGE_TYPES = (JPEG, PNG, GIF, WEBP)
PDF_TYPES = (PDF,)

# Enough bytes to tell every type above apart (WebP needs 12).
SNIFF_BYTES = 12


def media_type(data: bytes) -> str | None:
    """The media type ``data`` starts like, by its magic bytes, or None when it is none of ours."""
    if data.startswith(b"\xff\xd8\xff"):
        return JPEG
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return PNG
    if data.startswith((b"GIF87a", b"GIF89a")):
        return GIF
    if data.startswith(b"RIFF") and data[8:12] == b"WEBP":
        return WEBP
    if data.startswith(b"%PDF-"):
        return PDF
    return None


# A JPEG's size is in its first start-of-frame segment, after the APPn/DQT/DHT segments; this
# many leading bytes hold it in every ordinary file (an EXIF block with a thumbnail is ~10-60 KB).
SIZE_BYTES = 128 * 1024
# JPEG start-of-frame markers (SOF0-SOF15 less DHT, JPG and DAC, which share the range).
_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def image_size(data: bytes) -> tuple[int, int] | None:
    """An image's ``(width, height)`` from its header, read from ``data`` (its first bytes are
    enough: ``SIZE_BYTES``); None when the header is not in them or is not one of ours."""
    kind = media_type(data)
    if kind == PNG and len(data) >= 24 and data[12:16] == b"IHDR":
        return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    if kind == GIF and len(data) >= 10:
        return int.from_bytes(data[6:8], "little"), int.from_bytes(data[8:10], "little")
    if kind == WEBP:
        return _webp_size(data)
    if kind == JPEG:
        return _jpeg_size(data)
    return None


def _webp_size(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8 " and len(data) >= 30 and data[23:26] == b"\x9d\x01\x2a":
        width = int.from_bytes(data[26:28], "little") & 0x3FFF
        return width, int.from_bytes(data[28:30], "little") & 0x3FFF
    if chunk == b"VP8L" and len(data) >= 25 and data[20] == 0x2F:
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X" and len(data) >= 30:
        return int.from_bytes(data[24:27], "little") + 1, int.from_bytes(data[27:30], "little") + 1
    return None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    at = 2
    while at + 9 <= len(data):
        if data[at] != 0xFF:
            return None
        marker = data[at + 1]
        if marker == 0xFF:  # fill byte before a marker
            at += 1
            continue
        if marker in _SOF:
            height = int.from_bytes(data[at + 5 : at + 7], "big")
            return int.from_bytes(data[at + 7 : at + 9], "big"), height
        if marker == 0xD8 or 0xD0 <= marker <= 0xD7:  # markers without a length
            at += 2
            continue
        at += 2 + int.from_bytes(data[at + 2 : at + 4], "big")
    return None
