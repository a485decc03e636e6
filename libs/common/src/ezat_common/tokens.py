"""Tokens estimated from text, where the deployment reported no count.

One rule for every service: about 4 characters a token (the usual share for English text),
rounded up. The router estimates the output of a stream cut before its final count
(docs/billing.md); the router and the translator estimate reasoning tokens from the thinking
text, never more than the output they are part of (thinking is billed as output).
"""

from __future__ import annotations

CHARS_PER_TOKEN = 4


def text_tokens(chars: int) -> int:
    """``chars`` characters of text as tokens: ``ceil(chars / CHARS_PER_TOKEN)``."""
    return -(-chars // CHARS_PER_TOKEN)


def reasoning_tokens(thinking_chars: int, output_tokens: int) -> int:
    """The reasoning share of ``output_tokens``, estimated from the thinking text."""
    return min(text_tokens(thinking_chars), output_tokens)
