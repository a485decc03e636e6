"""Anthropic token counts as both OpenAI APIs report them (docs/api.md, "Response";
docs/responses.md, "Usage").

All input is uncached + cache read + cache write. Reasoning tokens are the deployment's own count
when it reports one (the bundled simulator does); Anthropic does not, so they are estimated from
the thinking text (``ezat_common.tokens.reasoning_tokens``, never above the output).
"""

from __future__ import annotations

from ezat_common.schemas.anthropic import Usage
from ezat_common.tokens import reasoning_tokens
from msgspec import Struct


class TokenCounts(Struct, kw_only=True):
    """Anthropic counts merged over a stream: later non-null values replace earlier ones."""

    input_tokens: int = 0
    cache_read: int = 0
    cache_write: int = 0
    output_tokens: int = 0
    reasoning_tokens: int | None = None
    # The answer's price as the router put it in the final usage (docs/billing.md).
    cost_usd: float | None = None

    def merge(self, usage: Usage) -> None:
        if usage.input_tokens is not None:
            self.input_tokens = usage.input_tokens
        if usage.cache_read_input_tokens is not None:
            self.cache_read = usage.cache_read_input_tokens
        write = cache_write_tokens(usage)
        if write is not None:
            self.cache_write = write
        if usage.output_tokens is not None:
            self.output_tokens = usage.output_tokens
        if usage.reasoning_tokens is not None:
            self.reasoning_tokens = usage.reasoning_tokens
        if usage.cost_usd is not None:
            self.cost_usd = usage.cost_usd

    @property
    def all_input(self) -> int:
        """Every input token, cached or not: uncached + cache read + cache write."""
        return self.input_tokens + self.cache_read + self.cache_write

    def reasoning(self, thinking_chars: int) -> int:
        """The reported reasoning count, else the estimate from ``thinking_chars``."""
        if self.reasoning_tokens is not None:
            return self.reasoning_tokens
        return reasoning_tokens(thinking_chars, self.output_tokens)


def cache_write_tokens(usage: Usage) -> int | None:
    """The cache-write total, or the sum of its per-TTL breakdown when only that is sent."""
    total: int | None = usage.cache_creation_input_tokens
    if total is None and usage.cache_creation is not None:
        detail = usage.cache_creation
        total = detail.ephemeral_5m_input_tokens + detail.ephemeral_1h_input_tokens
    return total
