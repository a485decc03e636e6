"""What a usage record costs, in integer micro-dollars (money is never a float here).

Prices are micro-dollars per million tokens (``ezat_common.prices.Prices``), and server-tool
requests micro-dollars per 1,000 requests, so the exact cost of a record is
``(sum(tokens * price) + sum(requests * price_per_1k * 1000)) / 1_000_000`` micro-dollars; we
round that once, half up (docs/billing.md, "The record" and "Server tools").

Which prices: the deployment's own when it has one (``Catalogue.deployment_prices``), else the
model's (``prices_for``, ``Pricer``).

One computation for the row and the answer (docs/billing.md, "Cost in the answer"): the router
prices the record of an answer here, puts the prices in the record (``UsageRecord.prices``) and
the cost in the answer (``cost_usd``, ``x-ezat-cost-usd``); billing stores the row at the record's
prices with the same ``cost_micros``, so the two are equal whatever billing's config says.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from .catalogue import SERVER_TOOL_PRICES, TOKEN_PRICES, Catalogue, Prices
from .envelopes import UsageRecord

PER_MILLION = 1_000_000
# A price per 1,000 requests, scaled to the denominator of a price per million tokens.
PER_1K_TO_PER_MILLION = PER_MILLION // 1000

# A model missing from the catalogue is still recorded (the tokens are facts), at price 0.
FREE = Prices(input=0, output=0, cache_write_5m=0, cache_write_1h=0, cache_read=0)


class Counts(Protocol):
    """What ``cost_micros`` reads of a record: a ``UsageRecord``, or a Struct decoding only these
    fields of one (the edge's request log: edge/core/request_log.py)."""

    @property
    def status(self) -> str: ...
    @property
    def input_tokens(self) -> int: ...
    @property
    def cache_read_tokens(self) -> int: ...
    @property
    def cache_write_5m_tokens(self) -> int: ...
    @property
    def cache_write_1h_tokens(self) -> int: ...
    @property
    def output_tokens(self) -> int: ...
    @property
    def web_search_requests(self) -> int: ...
    @property
    def web_fetch_requests(self) -> int: ...


def cost_micros(record: Counts, prices: Prices) -> int:
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
        + _count(record.web_search_requests) * prices.web_search_per_1k * PER_1K_TO_PER_MILLION
        + _count(record.web_fetch_requests) * prices.web_fetch_per_1k * PER_1K_TO_PER_MILLION
    )
    return _round_half_up(scaled, PER_MILLION)


def prices_for(
    record: UsageRecord,
    model_id: str | None,
    models: Mapping[str, Prices],
    deployments: Mapping[tuple[str, str], Prices],
) -> Prices | None:
    """The prices ``record`` is billed at: its deployment's own, when that deployment has a price
    for the record's model (``model_id``, the canonical id the record's model resolves to; a
    deployment moved to another model since keeps no price for the old one), else the model's;
    None when neither is known."""
    if model_id is None:
        return None
    own = deployments.get((record.deployment, model_id))
    return own if own is not None else models.get(model_id)


def prices_json(prices: Prices) -> dict[str, int]:
    """The prices a row was billed at (micro-dollars per million tokens; the server tools'
    ``…_per_1k`` per 1,000 requests), for its ``prices`` jsonb column: a later price change must
    not make old rows unexplainable."""
    return {name: getattr(prices, name) for name in (*TOKEN_PRICES, *SERVER_TOOL_PRICES)}


def _count(tokens: int) -> int:
    # A negative count can only be a bug upstream; it must never turn into a credit.
    return tokens if tokens > 0 else 0


def _round_half_up(numerator: int, denominator: int) -> int:
    # Both operands are non-negative, so floor division of (n + d/2) is exact half-up rounding.
    return (numerator + denominator // 2) // denominator


# The answer header with a JSON answer's cost (docs/api.md, "Cost in the answer").
COST_HEADER = "x-ezat-cost-usd"


class Pricer:
    """Prices of records by a catalogue: the deployment's own, else the model's (by any of its
    names; routers send canonical ids)."""

    __slots__ = ("_catalogue",)

    def __init__(self, catalogue: Catalogue) -> None:
        # Read at each record, not copied: a reload (``Catalogue.replace``) applies to the next.
        self._catalogue = catalogue

    def prices(self, record: UsageRecord) -> Prices | None:
        """``record``'s prices, None for a model the catalogue does not know."""
        catalogue = self._catalogue
        models, deployments = catalogue.prices, catalogue.deployment_prices
        model_id: str | None = record.model if record.model in models else None
        if model_id is None:
            model = catalogue.resolve(record.model)
            model_id = model.id if model else None
        return prices_for(record, model_id, models, deployments)


def usd(micros: int) -> float:
    """``cost_usd`` of an answer: the row's ``cost_micros`` in dollars (the nearest double to
    micros / 10^6, which a JSON reader also gets from ``usd_text``)."""
    return micros / PER_MILLION


def usd_text(micros: int) -> str:
    """The exact decimal of ``micros`` in dollars, for the header: 1234 -> ``0.001234``."""
    whole, frac = divmod(micros, PER_MILLION)
    return f"{whole}.{frac:06d}".rstrip("0").rstrip(".") if frac else str(whole)
