"""Image dimensions read from the header (ezat_common.media.image_size), for the translator's
count_tokens estimate (docs/api.md, "count_tokens"). The headers are built byte by byte
(``support/image_headers.py``)."""

from __future__ import annotations

import pytest
from ezat_common.media import image_size
from support.image_headers import gif, jpeg, png, vp8, vp8l, vp8x


@pytest.mark.parametrize(
    ("data", "size"),
    [
        (png(800, 600), (800, 600)),
        (gif(320, 200), (320, 200)),
        (jpeg(1920, 1080), (1920, 1080)),
        (jpeg(640, 480, marker=0xC2), (640, 480)),  # progressive
        (vp8(1000, 500), (1000, 500)),
        (vp8l(16383, 2), (16383, 2)),
        (vp8x(4000, 3000), (4000, 3000)),
    ],
    ids=["png", "gif", "jpeg", "jpeg-progressive", "webp-vp8", "webp-vp8l", "webp-vp8x"],
)
def test_the_header_gives_the_size(data: bytes, size: tuple[int, int]) -> None:
    assert image_size(data) == size


@pytest.mark.parametrize(
    "data",
    [
        png(800, 600)[:20],  # cut before the height
        jpeg(1920, 1080)[:60],  # the frame header is beyond what was read
        b"\xff\xd8\x00\x00",  # not a marker where one must be
        b"%PDF-1.7\n",
        b"",
    ],
    ids=["png-cut", "jpeg-cut", "jpeg-garbage", "pdf", "empty"],
)
def test_no_size_when_the_header_does_not_say(data: bytes) -> None:
    assert image_size(data) is None
