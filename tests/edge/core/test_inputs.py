"""The body's UTF-8 check (``core/inputs.refused_body``): piece by piece, so a large non-ASCII
body never becomes one large str, with the same verdict and offset as a whole-body decode."""

from __future__ import annotations

import re

import pytest
from ezat_edge.core import inputs
from hypothesis import given
from hypothesis import strategies as st

# Valid characters of every width, and bytes that are never or only partly UTF-8 (a lone
# continuation, a cut two- and three-byte sequence, an encoded surrogate).
PIECES = ["a", "é", "€", "😀", b"\xff", b"\x80", b"\xc3", b"\xe2\x82", b"\xed\xa0\x80"]


def _whole(body: bytes) -> int | None:
    try:
        body.decode()
    except UnicodeDecodeError as exc:
        return exc.start
    return None


def _offset(body: bytes) -> int | None:
    refusal = inputs.refused_body(body)
    if refusal is None:
        return None
    found = re.search(r"offset (\d+)\)", refusal.reply.message)
    assert found is not None, refusal.reply.message
    return int(found[1])


@given(st.lists(st.sampled_from(PIECES), max_size=40), st.integers(1, 9))
def test_pieces_give_the_whole_decodes_verdict_and_offset(
    parts: list[str | bytes], size: int
) -> None:
    body = b"".join(p.encode() if isinstance(p, str) else p for p in parts)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(inputs, "UTF8_PIECE", size)
        assert _offset(body) == _whole(body)


def test_an_ascii_body_passes_and_a_bad_byte_is_named() -> None:
    assert inputs.refused_body(b'{"a": "b"}') is None
    assert _offset('{"a": "é"}'.encode() + b"\xff") == 11
