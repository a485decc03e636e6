"""Pricing: a hand-computed table, then properties (monotone; exact sum rounded half up)."""

from __future__ import annotations

from fractions import Fraction

import pytest
from ezat_billing.core.pricing import FREE, cost_micros, prices_json
from ezat_common.catalogue import Prices, prices_of
from ezat_common.config import Price
from hypothesis import given
from hypothesis import strategies as st

from ..factories import SONNET, record

TOKEN_FIELDS = (
    "input_tokens",
    "cache_read_tokens",
    "cache_write_5m_tokens",
    "cache_write_1h_tokens",
    "output_tokens",
)
PRICE_OF_FIELD = {
    "input_tokens": "input",
    "cache_read_tokens": "cache_read",
    "cache_write_5m_tokens": "cache_write_5m",
    "cache_write_1h_tokens": "cache_write_1h",
    "output_tokens": "output",
}
HALF = Prices(
    input=500_000, output=1_500_000, cache_write_5m=0, cache_write_1h=0, cache_read=400_000
)


def zero(**tokens: int) -> dict[str, int]:
    counts = dict.fromkeys(TOKEN_FIELDS, 0)
    counts.update(tokens)
    return counts


# (name, prices, token counts, status, expected micro-dollars) computed by hand:
# tokens x (USD per million x 1e6) / 1e6.
TABLE = [
    ("uncached input $3/M", SONNET, zero(input_tokens=1000), "complete", 3_000),
    ("cache read $0.30/M", SONNET, zero(cache_read_tokens=10_000), "complete", 3_000),
    ("cache write 5m $3.75/M", SONNET, zero(cache_write_5m_tokens=2_000), "complete", 7_500),
    ("cache write 1h $6/M", SONNET, zero(cache_write_1h_tokens=2_000), "complete", 12_000),
    ("output $15/M", SONNET, zero(output_tokens=500), "complete", 7_500),
    (
        "everything at once",
        SONNET,
        zero(
            input_tokens=1000,
            cache_read_tokens=10_000,
            cache_write_5m_tokens=2_000,
            cache_write_1h_tokens=2_000,
            output_tokens=500,
        ),
        "complete",
        33_000,
    ),
    (
        "one million output tokens = $15",
        SONNET,
        zero(output_tokens=1_000_000),
        "complete",
        15_000_000,
    ),
    ("0.5 micro rounds up", HALF, zero(input_tokens=1), "complete", 1),
    ("1.5 micro rounds up", HALF, zero(output_tokens=1), "complete", 2),
    ("2.5 micro rounds up", HALF, zero(input_tokens=5), "complete", 3),
    ("0.4 micro rounds down", HALF, zero(cache_read_tokens=1), "complete", 0),
    ("1.2 micro rounds down", HALF, zero(cache_read_tokens=3), "complete", 1),
    (
        "rounding once on the sum (0.5 + 0.4 = 0.9)",
        HALF,
        zero(input_tokens=1, cache_read_tokens=1),
        "complete",
        1,
    ),
    (
        "client closed early pays",
        SONNET,
        zero(input_tokens=1000, output_tokens=10),
        "client_closed",
        3_150,
    ),
    ("failed is free", SONNET, zero(input_tokens=1000, output_tokens=500), "failed", 0),
]


@pytest.mark.parametrize(
    ("prices", "tokens", "status", "expected"),
    [case[1:] for case in TABLE],
    ids=[case[0] for case in TABLE],
)
def test_cost_matches_hand_computed_table(
    prices: Prices, tokens: dict[str, int], status: str, expected: int
) -> None:
    assert cost_micros(record(status=status, **tokens), prices) == expected


def test_reasoning_tokens_are_part_of_output_not_added_again() -> None:
    without = record(**zero(output_tokens=500))
    with_thinking = record(reasoning_tokens=400, **zero(output_tokens=500))
    assert cost_micros(with_thinking, SONNET) == cost_micros(without, SONNET) == 7_500


def test_default_cache_prices_follow_spec_multipliers() -> None:
    # $1/M input: cache write 5m 1.25x, 1h 2x, cache read 0.1x (docs/billing.md).
    prices = prices_of(Price(input=1.0, output=5.0))
    tokens = zero(cache_write_5m_tokens=1000, cache_write_1h_tokens=1000, cache_read_tokens=1000)
    assert cost_micros(record(**tokens), prices) == 1_250 + 2_000 + 100


def test_negative_counts_never_become_a_credit() -> None:
    assert cost_micros(record(**zero(input_tokens=-1_000_000, output_tokens=1)), SONNET) == 15


def test_unknown_model_price_is_zero() -> None:
    assert cost_micros(record(**zero(input_tokens=10**9, output_tokens=10**9)), FREE) == 0


def test_prices_json_records_every_price() -> None:
    assert prices_json(SONNET) == {
        "input": 3_000_000,
        "output": 15_000_000,
        "cache_write_5m": 3_750_000,
        "cache_write_1h": 6_000_000,
        "cache_read": 300_000,
        "web_search_per_1k": 0,
        "web_fetch_per_1k": 0,
    }
    listed = prices_json(prices_of(Price(input=3.0, output=15.0)))
    assert (listed["web_search_per_1k"], listed["web_fetch_per_1k"]) == (10_000_000, 0)


counts = st.integers(min_value=0, max_value=10**9)
price = st.integers(min_value=0, max_value=200_000_000)
prices_st = st.builds(
    Prices, input=price, output=price, cache_write_5m=price, cache_write_1h=price, cache_read=price
)
tokens_st = st.fixed_dictionaries({f: counts for f in TOKEN_FIELDS})


@given(prices=prices_st, tokens=tokens_st)
def test_cost_is_exact_sum_of_parts_rounded_half_up(prices: Prices, tokens: dict[str, int]) -> None:
    exact = sum(
        Fraction(tokens[f] * getattr(prices, PRICE_OF_FIELD[f]), 1_000_000) for f in TOKEN_FIELDS
    )
    cost = cost_micros(record(**tokens), prices)
    # Half up: exact - 1/2 < cost <= exact + 1/2, with ties going up.
    assert exact - Fraction(1, 2) < cost <= exact + Fraction(1, 2)
    if exact - int(exact) == Fraction(1, 2):
        assert cost == int(exact) + 1
    parts = [cost_micros(record(**zero(**{f: tokens[f]})), prices) for f in TOKEN_FIELDS]
    # Rounding each of the five parts moves each by at most 1/2, so the sums differ by <= 2.
    assert abs(cost - sum(parts)) <= 2


@given(
    prices=prices_st,
    tokens=tokens_st,
    field=st.sampled_from(TOKEN_FIELDS),
    extra=st.integers(min_value=0, max_value=10**9),
)
def test_cost_is_monotone_in_each_token_count(
    prices: Prices, tokens: dict[str, int], field: str, extra: int
) -> None:
    more = dict(tokens)
    more[field] += extra
    assert cost_micros(record(**more), prices) >= cost_micros(record(**tokens), prices)


@given(prices=prices_st, tokens=tokens_st)
def test_failed_requests_cost_nothing_whatever_the_tokens(
    prices: Prices, tokens: dict[str, int]
) -> None:
    assert cost_micros(record(status="failed", **tokens), prices) == 0
