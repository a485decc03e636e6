"""ezat_common.tokens: the one text estimate of tokens, and the reasoning share of an output."""

from __future__ import annotations

import pytest
from ezat_common.tokens import reasoning_tokens, text_tokens


@pytest.mark.parametrize(
    ("chars", "tokens"), [(0, 0), (1, 1), (4, 1), (5, 2), (8, 2), (9, 3), (400, 100)]
)
def test_estimate_is_ceil_of_chars_over_four(chars: int, tokens: int) -> None:
    assert text_tokens(chars) == tokens


@pytest.mark.parametrize(
    ("thinking_chars", "output", "reasoning"),
    [
        (0, 10, 0),
        (1, 10, 1),
        (40, 10, 10),  # exactly the output
        (41, 10, 10),  # never above the output
        (400, 7, 7),
        (9, 0, 0),
    ],
)
def test_reasoning_is_the_thinking_estimate_capped_at_the_output(
    thinking_chars: int, output: int, reasoning: int
) -> None:
    assert reasoning_tokens(thinking_chars, output) == reasoning
