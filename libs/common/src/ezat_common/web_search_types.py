"""The OpenAI APIs' web search tool types, known to two services: the translator maps them to
Anthropic's server tool (which sets its own ``max_uses``), and the edge's budget hold must not
trust a client's ``max_uses`` on them (docs/billing.md, "Budget holds"). Any other
``web_search_*`` type is Anthropic's own, whose ``max_uses`` the upstream enforces."""

from __future__ import annotations

OPENAI_SEARCH_TYPES = frozenset(
    (
        "web_search",
        "web_search_2025_08_26",
        "web_search_preview",
        "web_search_preview_2025_03_11",
    )
)
