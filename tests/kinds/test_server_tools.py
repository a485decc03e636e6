"""Server-tool use priced end to end (docs/billing.md, "Server tools"): the simulator reports
web searches in the final usage (``[sim:web_search=N]``, simulator/README.md), the official SDK
sees them through the gateway, and the usage row counts them and charges them per 1,000 at the
catalogue's price, on the Anthropic, Bedrock invoke and Vertex kinds, streamed and not."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg
import pytest
from ezat_common.catalogue import WEB_SEARCH_PER_1K, Catalogue, Prices
from msgspec import structs

from .conftest import Kinds

SEARCHES = 3
ASK = [{"role": "user", "content": f"what is new? [sim:web_search={SEARCHES}]"}]
# The row's counts and the price each is charged at (micro-dollars per million tokens).
TOKEN_COLUMNS = {
    "input_tokens": "input",
    "cache_read_tokens": "cache_read",
    "cache_write_5m_tokens": "cache_write_5m",
    "cache_write_1h_tokens": "cache_write_1h",
    "output_tokens": "output",
}


async def _ask(gw: Kinds, model: str, stream: bool) -> tuple[Any, str]:
    """The SDK's usage of one searching request, and its request id."""
    request_id = f"tools-{uuid.uuid4().hex[:16]}"
    args: dict[str, Any] = {"model": model, "max_tokens": 32, "messages": ASK}
    args["extra_headers"] = {"x-request-id": request_id}
    client = gw.anthropic()
    if not stream:
        return (await client.messages.create(**args)).usage, request_id
    delta = None
    async with client.messages.stream(**args) as s:
        async for event in s:
            if event.type == "message_delta":
                delta = event.usage
        final = (await s.get_final_message()).usage
    # The stream's message_delta carried it, and the SDK kept it in the final message.
    assert delta is not None and delta.server_tool_use == final.server_tool_use
    return final, request_id


def _prices(gw: Kinds, row: asyncpg.Record, model: str) -> Prices:
    """The catalogue's prices for the row: its deployment's own, else its model's."""
    catalogue = Catalogue(gw.stack.cfg)
    model_id = f"anthropic/{model}"
    own = catalogue.deployment_prices.get((row["deployment"], model_id))
    return own if own is not None else catalogue.prices[model_id]


def _expected_cost(row: asyncpg.Record, prices: Prices) -> int:
    """Integer micro-dollars: tokens x price per million, plus server-tool requests x price per
    1,000 (x 1,000 to the same denominator), over one million, rounded once, half up
    (docs/billing.md)."""
    scaled: int = sum(row[count] * getattr(prices, price) for count, price in TOKEN_COLUMNS.items())
    scaled += row["web_search_requests"] * prices.web_search_per_1k * 1000
    scaled += row["web_fetch_requests"] * prices.web_fetch_per_1k * 1000
    return (scaled + 500_000) // 1_000_000


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("model", ["anthropic-only", "bedrock-only", "vertex-only"])
async def test_web_searches_reach_the_sdk_and_are_priced_in_the_usage_row(
    gw: Kinds, model: str, stream: bool
) -> None:
    usage, request_id = await _ask(gw, model, stream)
    assert usage.server_tool_use is not None
    assert usage.server_tool_use.web_search_requests == SEARCHES
    assert usage.server_tool_use.web_fetch_requests == 0

    row = await gw.row(request_id)
    assert (row["status"], row["estimated"]) == ("complete", False)
    assert (row["web_search_requests"], row["web_fetch_requests"]) == (SEARCHES, 0)
    assert (row["input_tokens"], row["output_tokens"]) == (usage.input_tokens, usage.output_tokens)
    prices = _prices(gw, row, model)
    # No price in the kinds config names searches: Anthropic's published $10 per 1,000 applies
    # (only-bedrock's own price names tokens only, so it keeps the model's search price).
    assert prices.web_search_per_1k == round(WEB_SEARCH_PER_1K * 1_000_000) > 0
    assert row["cost_micros"] == _expected_cost(row, prices), dict(row)
    # What the searches add beside the tokens: 3 x the price per 1,000 / 1,000.
    tokens_only = _expected_cost(row, structs.replace(prices, web_search_per_1k=0))
    assert row["cost_micros"] - tokens_only == SEARCHES * prices.web_search_per_1k // 1000
