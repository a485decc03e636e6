"""What a file is, decided from its first bytes (never from a Content-Type header).

A server can label anything ``image/png``; the model provider will reject what is not an image,
and worse, we would forward arbitrary bytes. So the magic numbers decide.
"""

from __future__ import annotations

JPEG = "image/jpeg"
PNG = "image/png"
GIF = "image/gif"
WEBP = "image/webp"
PDF = "application/pdf"

IMAGE_TYPES = frozenset({JPEG, PNG, GIF, WEBP})

# What each FetchRequest.kind accepts.
ACCEPTED: dict[str, frozenset[str]] = {"image": IMAGE_TYPES, "pdf": frozenset({PDF})}

# Enough bytes to tell every type above apart (WebP needs 12).
SNIFF_BYTES = 12


def media_type(data: bytes) -> str | None:
    """The media type of ``data`` by its magic bytes, or None when it is none of ours."""
    if data.startswith(b"\xff\xd8\xff"):
        return JPEG
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return PNG
    if data.startswith((b"GIF87a", b"GIF89a")):
        return GIF
    if len(data) >= 12 and data.startswith(b"RIFF") and data[8:12] == b"WEBP":
        return WEBP
    if data.startswith(b"%PDF-"):
        return PDF
    return None


def accepted_type(data: bytes, kind: str) -> str | None:
    """The media type of ``data`` when a request of this ``kind`` accepts it, else None."""
    found = media_type(data)
    return found if found is not None and found in ACCEPTED.get(kind, frozenset()) else None
