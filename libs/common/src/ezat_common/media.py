"""What a file is, decided from its first bytes (never from a declared type or header).

A client or a server can label anything ``image/png``; the provider would reject what is not an
image and, worse, the gateway would forward arbitrary bytes. This is a security check, so the
translator (inline ``data:`` URLs) and the fetcher (downloaded URLs) read the magic bytes here,
through one function that cannot drift apart (docs/architecture.md).
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
