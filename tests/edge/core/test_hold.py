"""core/hold.py: a request's worst case from its body and its model's prices (docs/billing.md,
"Budget holds")."""

from __future__ import annotations

import pytest
from ezat_common.catalogue import Prices
from ezat_edge.core.hold import WEB_SEARCH_USES, Ask, ask_of, dearest, worst_case

# $3 / $15 per million tokens; 1h cache write $6; web search $10 per 1,000.
PRICES = Prices(
    input=3_000_000,
    output=15_000_000,
    cache_write_5m=3_750_000,
    cache_write_1h=6_000_000,
    cache_read=300_000,
    web_search_per_1k=10_000_000,
)


@pytest.mark.parametrize(
    ("body", "cache_header", "ask"),
    [
        # Anthropic: max_tokens; 40 bytes -> 10 tokens.
        (b'{"max_tokens":100,"model":"m","x":"ab"}', False, Ask(10, 100, False, 0)),
        # chat: max_completion_tokens wins over the deprecated max_tokens.
        (b'{"max_tokens":9,"max_completion_tokens":50}', False, Ask(11, 50, False, 0)),
        # Responses: max_output_tokens.
        (b'{"max_output_tokens":7}', False, Ask(6, 7, False, 0)),
        # No limit named: the model's maximum output.
        (b'{"model":"m"}', False, Ask(4, 64_000, False, 0)),
        # Not JSON: held at the model's maximum.
        (b"not json", False, Ask(2, 64_000, False, 0)),
        # A cache breakpoint, or the gateway's cache header: it can write cache.
        (b'{"max_tokens":1,"cache_control":{}}', False, Ask(9, 1, True, 0)),
        (b'{"max_tokens":1}', True, Ask(4, 1, True, 0)),
        # Web search: its max_uses, else WEB_SEARCH_USES; other tools cost no fee.
        (
            b'{"max_tokens":1,"tools":[{"type":"web_search_20250305","max_uses":3},'
            b'{"type":"custom"},{"type":"web_search_preview"}]}',
            False,
            Ask(30, 1, False, 3 + WEB_SEARCH_USES),
        ),
        # Chat Completions' web_search_options, even empty, turns the search tool on.
        (b'{"max_tokens":1,"web_search_options":{}}', False, Ask(10, 1, False, WEB_SEARCH_USES)),
    ],
)
def test_what_a_body_asks_for(body: bytes, cache_header: bool, ask: Ask) -> None:
    assert ask_of(body, 64_000, cache_header) == ask


@pytest.mark.parametrize(
    ("ask", "micros"),
    [
        # 10 input x $3/M = 30 µ$, 100 output x $15/M = 1,500 µ$.
        (Ask(10, 100, False, 0), 1_530),
        # Cache: input at the 1h write price ($6/M).
        (Ask(10, 100, True, 0), 1_560),
        # Two searches at $10 per 1,000 = 20,000 µ$.
        (Ask(10, 100, False, 2), 21_530),
        # Rounded up, never down: 1 input token is 3 µ$, 1 output 15 µ$.
        (Ask(1, 0, False, 0), 3),
        (Ask(0, 0, False, 0), 0),
    ],
)
def test_the_worst_case_in_micro_dollars(ask: Ask, micros: int) -> None:
    assert worst_case(PRICES, ask) == micros


def test_fractions_of_a_micro_dollar_round_up() -> None:
    cheap = Prices(input=1, output=1, cache_write_5m=1, cache_write_1h=1, cache_read=1)
    assert worst_case(cheap, Ask(1, 1, False, 0)) == 1


def test_the_dearest_deployment_price_counts() -> None:
    dear = Prices(input=9, output=1, cache_write_5m=1, cache_write_1h=1, cache_read=1)
    top = dearest([PRICES, dear])
    assert (top.input, top.output) == (PRICES.input, PRICES.output)
    assert dearest([dear, PRICES]) == top
