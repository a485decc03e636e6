"""Which media types each kind of download accepts (core/media.py); the sniffer itself is tested
in tests/common/test_media.py."""

from __future__ import annotations

import pytest
from ezat_fetcher.core.media import accepted_type

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
WEBP = b"RIFF\x24\x00\x00\x00WEBPVP8 "
PDF = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n"


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
