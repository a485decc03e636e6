"""A request's worst case: the most its row can cost, held against its budgets before it is
admitted (docs/billing.md, "Budget holds").

worst case = counted input x the input price (the 1-hour cache-write price instead, when the
request can write cache), + ``max_tokens`` x the output price (the model's ``max_output_tokens``
when the request names none), + the web-search fee x ``max_uses`` (``WEB_SEARCH_USES`` when it
names none) when its tools include web search, or ``WEB_SEARCH_USES`` when a Chat Completions
request sets ``web_search_options`` (the translator allows at most 5 searches for it: holding
more errs on the side of the budget). Input is counted as the edge counts it for
``tpm`` (``core/estimate.py``: 1 token per 4 body bytes), which is more than the model bills for
text and far more for images: a hold errs on the side of the budget. Integer micro-dollars,
rounded up.
"""

from __future__ import annotations

import msgspec
from ezat_common.catalogue import Catalogue, Prices
from ezat_common.web_search_types import OPENAI_SEARCH_TYPES

from .estimate import body_tokens

# Web searches held for a request whose web-search tool names no ``max_uses``.
WEB_SEARCH_USES = 10
_MILLION = 1_000_000


class _Tool(msgspec.Struct):
    type: str | None = None
    # Any JSON: a malformed value must not make the whole body unreadable to the hold.
    max_uses: object = None


class _Limits(msgspec.Struct):
    max_tokens: int | None = None  # Anthropic messages, chat (deprecated there)
    max_completion_tokens: int | None = None  # chat
    max_output_tokens: int | None = None  # responses
    tools: list[_Tool] | None = None
    # Chat Completions' web search: present (even empty) turns the search tool on.
    web_search_options: dict[str, object] | None = None


_decode = msgspec.json.Decoder(_Limits).decode


class Ask(msgspec.Struct, frozen=True):
    """What a request asks for that bounds its cost."""

    input_tokens: int
    max_tokens: int
    writes_cache: bool
    web_searches: int


def ask_of(body: bytes, default_max_tokens: int, cache_header: bool) -> Ask:
    """The bounds ``body`` asks for; a body the edge cannot read (the translator answers it 400)
    is held at the model's maximum output."""
    try:
        limits = _decode(body)
    except (msgspec.DecodeError, RecursionError):
        limits = _Limits()
    asked = limits.max_completion_tokens or limits.max_tokens or limits.max_output_tokens
    searches = 0
    for tool in limits.tools or ():
        if tool.type is not None and tool.type.startswith("web_search"):
            searches += _search_uses(tool)
    if limits.web_search_options is not None:
        searches += WEB_SEARCH_USES
    return Ask(
        input_tokens=body_tokens(len(body)),
        max_tokens=max(asked or default_max_tokens, 0),
        writes_cache=cache_header or b'"cache_control"' in body,
        web_searches=searches,
    )


def _search_uses(tool: _Tool) -> int:
    """The searches held for one web-search tool: an Anthropic tool's ``max_uses`` when it is a
    positive whole number (the upstream refuses any other), else ``WEB_SEARCH_USES``."""
    uses = tool.max_uses
    # The OpenAI APIs' types have no max_uses of their own: the translator sets it (at most 5),
    # so what a client wrote there does not bound the searches.
    if tool.type not in OPENAI_SEARCH_TYPES and type(uses) is int and uses > 0:
        return uses
    return WEB_SEARCH_USES


def worst_case(prices: Prices, ask: Ask) -> int:
    """The most ``ask`` can cost at ``prices``, in micro-dollars (rounded up)."""
    input_price = max(prices.input, prices.cache_write_1h) if ask.writes_cache else prices.input
    tokens = ask.input_tokens * input_price + ask.max_tokens * prices.output
    searches = ask.web_searches * prices.web_search_per_1k
    return -(-tokens // _MILLION) + -(-searches // 1000)


def dearest(prices: list[Prices]) -> Prices:
    """Each price at its highest of ``prices``: a request may be routed to any deployment."""
    return Prices(*(max(getattr(p, f) for p in prices) for f in Prices.__struct_fields__))


class Worst:
    """The worst case of a request to each catalogue model (by canonical id): the dearest of
    its own price and its deployments', and its ``max_output_tokens`` when it asks for none."""

    def __init__(self, catalogue: Catalogue) -> None:
        self._of: dict[str, tuple[Prices, int]] = {}
        for model in catalogue.models:
            own = [catalogue.prices[model.id]]
            own += [p for (_, mid), p in catalogue.deployment_prices.items() if mid == model.id]
            self._of[model.id] = (dearest(own), model.max_output_tokens)

    def of(self, model_id: str, body: bytes, cache_header: bool) -> int:
        """Micro-dollars; 0 for a model the catalogue does not know (it will be refused 404)."""
        found = self._of.get(model_id)
        if found is None:
            return 0
        prices, max_output = found
        return worst_case(prices, ask_of(body, max_output, cache_header))
