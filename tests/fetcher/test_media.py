"""Media types decided from magic bytes (core/media.py)."""

from __future__ import annotations

import pytest
from ezat_fetcher.core.media import accepted_type, media_type

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00"
GIF87 = b"GIF87a\x01\x00\x01\x00"
GIF89 = b"GIF89a\x01\x00\x01\x00"
WEBP = b"RIFF\x24\x00\x00\x00WEBPVP8 "
PDF = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n"


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (PNG, "image/png"),
        (JPEG, "image/jpeg"),
        (b"\xff\xd8\xff\xdb", "image/jpeg"),
        (GIF87, "image/gif"),
        (GIF89, "image/gif"),
        (WEBP, "image/webp"),
        (PDF, "application/pdf"),
        (b"", None),
        (b"\x89PNG\r\n", None),  # truncated signature
        (b"\xff\xd8", None),
        (b"GIF88a", None),
        (b"RIFF\x24\x00\x00\x00WAVEfmt ", None),  # RIFF but audio
        (b"RIFF\x24\x00\x00\x00WEB", None),  # too short for WebP
        (b"<html><body>not found</body></html>", None),
        (b"<svg xmlns='http://www.w3.org/2000/svg'/>", None),  # SVG is not accepted
        (b"BM\x36\x00\x00\x00", None),  # BMP
        (b" %PDF-1.7", None),  # leading junk
    ],
)
def test_media_type_from_magic_bytes(data: bytes, expected: str | None) -> None:
    assert media_type(data) == expected


@pytest.mark.parametrize(
    ("data", "kind", "expected"),
    [
        (PNG, "image", "image/png"),
        (WEBP, "image", "image/webp"),
        (PDF, "image", None),  # a PDF is not an image
        (PDF, "pdf", "application/pdf"),
        (PNG, "pdf", None),
        (PNG, "video", None),  # unknown kind accepts nothing
    ],
)
def test_accepted_type_by_kind(data: bytes, kind: str, expected: str | None) -> None:
    assert accepted_type(data, kind) == expected
