"""core.estimate: the input tokens a body counts in the key's TPM window (README.md, "Choices
where the spec is silent": ceil(body bytes / 4), at least 1)."""

from __future__ import annotations

import pytest
from ezat_edge.core.estimate import body_tokens
from hypothesis import given
from hypothesis import strategies as st


@pytest.mark.parametrize(
    ("body_bytes", "tokens"), [(0, 1), (1, 1), (4, 1), (5, 2), (8, 2), (4001, 1001)]
)
def test_a_body_counts_a_token_per_four_bytes_rounded_up(body_bytes: int, tokens: int) -> None:
    assert body_tokens(body_bytes) == tokens


@given(st.integers(min_value=0, max_value=64 * 1024 * 1024))
def test_the_estimate_never_undercounts_four_bytes_a_token(body_bytes: int) -> None:
    tokens = body_tokens(body_bytes)
    assert tokens >= 1
    assert 4 * tokens >= body_bytes > 4 * (tokens - 1) or body_bytes == 0
