"""OpenAI Chat Completions ``usage`` of Anthropic token counts (docs/api.md, "Response").

``prompt_tokens`` counts all input; ``completion_tokens`` is the output, thinking included; the
arithmetic is ``token_counts``'s, shared with the Responses API. ``cost_usd`` is the router's
price of the answer (docs/billing.md, "Cost in the answer").
"""

from __future__ import annotations

from ezat_common.schemas.openai import (
    CompletionTokensDetails,
    CompletionUsage,
    PromptTokensDetails,
)

from ezat_translator.core.token_counts import TokenCounts


def to_chat_usage(counts: TokenCounts, thinking_chars: int) -> CompletionUsage:
    prompt = counts.all_input
    output = counts.output_tokens
    return CompletionUsage(
        prompt_tokens=prompt,
        completion_tokens=output,
        total_tokens=prompt + output,
        prompt_tokens_details=PromptTokensDetails(
            cached_tokens=counts.cache_read, cache_write_tokens=counts.cache_write
        ),
        completion_tokens_details=CompletionTokensDetails(
            reasoning_tokens=counts.reasoning(thinking_chars)
        ),
        cost_usd=counts.cost_usd,
    )
