"""What a usage record costs, in integer micro-dollars (money is never a float here).

Prices are micro-dollars per million tokens (``ezat_common.catalogue.Prices``), so the exact cost
of a record is ``sum(tokens * price) / 1_000_000`` micro-dollars; we round that once, half up.
"""

from __future__ import annotations

from ezat_common.catalogue import Prices
from ezat_common.envelopes import UsageRecord

PER_MILLION = 1_000_000

# A model missing from the catalogue is still recorded (the tokens are facts), at price 0.
FREE = Prices(input=0, output=0, cache_write_5m=0, cache_write_1h=0, cache_read=0)


def cost_micros(record: UsageRecord, prices: Prices) -> int:
    """Cost of ``record`` in micro-dollars; failed requests cost nothing (docs/billing.md).

    Reasoning tokens are already inside ``output_tokens`` (thinking is billed as output), so they
    are not added a second time.
    """
    if record.status == "failed":
        return 0
    scaled = (
        _count(record.input_tokens) * prices.input
        + _count(record.cache_read_tokens) * prices.cache_read
        + _count(record.cache_write_5m_tokens) * prices.cache_write_5m
        + _count(record.cache_write_1h_tokens) * prices.cache_write_1h
        + _count(record.output_tokens) * prices.output
    )
    return _round_half_up(scaled, PER_MILLION)


def prices_json(prices: Prices) -> dict[str, int]:
    """The prices a row was billed at (micro-dollars per million tokens), for its ``prices`` jsonb
    column: a later price change must not make old rows unexplainable."""
    return {
        "input": prices.input,
        "output": prices.output,
        "cache_write_5m": prices.cache_write_5m,
        "cache_write_1h": prices.cache_write_1h,
        "cache_read": prices.cache_read,
    }


def _count(tokens: int) -> int:
    # A negative count can only be a bug upstream; it must never turn into a credit.
    return tokens if tokens > 0 else 0


def _round_half_up(numerator: int, denominator: int) -> int:
    # Both operands are non-negative, so floor division of (n + d/2) is exact half-up rounding.
    return (numerator + denominator // 2) // denominator
