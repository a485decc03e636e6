"""Media types decided from magic bytes (ezat_common.media), for the translator and the fetcher.

The two services had one sniffer each (translator ``sniff``, fetcher ``media_type``); the property
test keeps both former behaviours as references and checks that the shared function agrees with
each on any bytes, so that merging them changed no verdict.
"""

from __future__ import annotations

import pytest
from ezat_common.media import IMAGE_TYPES, SNIFF_BYTES, media_type
from hypothesis import given
from hypothesis import strategies as st

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
        (b"GIF87a..", "image/gif"),
        (WEBP, "image/webp"),
        (b"RIFF\x24\x00\x00\x00WEBP", "image/webp"),  # exactly SNIFF_BYTES
        (PDF, "application/pdf"),
        (b"", None),
        (b"\x89PNG\r\n", None),  # truncated signature
        (b"\xff\xd8", None),
        (b"GIF88a", None),
        (b"RIFF\x24\x00\x00\x00WAVEfmt ", None),  # RIFF but audio
        (b"RIFF\0\0\0\0WAVE", None),
        (b"RIFF\x24\x00\x00\x00WEB", None),  # too short for WebP
        (b"<html><body>not found</body></html>", None),
        (b"<svg xmlns='http://www.w3.org/2000/svg'/>", None),  # SVG is not accepted
        (b"BM\x36\x00\x00\x00", None),  # BMP
        (b" %PDF-1.7", None),  # leading junk
    ],
)
def test_media_type_from_magic_bytes(data: bytes, expected: str | None) -> None:
    assert media_type(data) == expected


def test_the_first_sniff_bytes_decide() -> None:
    for data in (PNG, JPEG, GIF87, WEBP, PDF):
        assert media_type(data[:SNIFF_BYTES]) == media_type(data + b"\x00" * 64)
    assert IMAGE_TYPES == ("image/jpeg", "image/png", "image/gif", "image/webp")


def _translator_sniff(data: bytes) -> str | None:
    """The translator's former core/media.py ``sniff``, verbatim."""
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    if data.startswith(b"%PDF-"):
        return "application/pdf"
    return None


def _fetcher_media_type(data: bytes) -> str | None:
    """The fetcher's former core/media.py ``media_type``, verbatim."""
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if len(data) >= 12 and data.startswith(b"RIFF") and data[8:12] == b"WEBP":
        return "image/webp"
    if data.startswith(b"%PDF-"):
        return "application/pdf"
    return None


# Random bytes rarely start with a signature: draw a known prefix (or a near miss) plus a tail.
_PREFIXES = st.sampled_from(
    [
        b"",
        b"\xff\xd8\xff",
        b"\xff\xd8",
        b"\x89PNG\r\n\x1a\n",
        b"\x89PNG\r\n",
        b"GIF87a",
        b"GIF89a",
        b"GIF8",
        b"RIFF",
        b"RIFF\0\0\0\0WEBP",
        b"RIFF\0\0\0\0WEB",
        b"%PDF-",
        b"%PDF",
    ]
)


@given(prefix=_PREFIXES, tail=st.binary(max_size=24))
def test_shared_sniffer_agrees_with_both_former_ones(prefix: bytes, tail: bytes) -> None:
    data = prefix + tail
    assert media_type(data) == _translator_sniff(data) == _fetcher_media_type(data)


@given(st.binary(max_size=32))
def test_shared_sniffer_agrees_on_arbitrary_bytes(data: bytes) -> None:
    assert media_type(data) == _translator_sniff(data) == _fetcher_media_type(data)
