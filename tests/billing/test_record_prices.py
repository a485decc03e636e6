"""A record that carries the prices its answer was priced at (``UsageRecord.prices``, set by the
router with the answer's ``cost_usd``) is stored at those prices, whatever billing's config says:
the row's cost is the answer's (docs/billing.md, "Cost in the answer")."""

from __future__ import annotations

from typing import cast

import asyncpg
from ezat_billing import config
from ezat_billing.batcher import Batcher
from ezat_billing.handlers import Handlers
from ezat_common.catalogue import Prices
from ezat_common.outbox import Outbox
from ezat_common.pricing import Pricer, cost_micros, usd, usd_text
from support.config import SONNET, model, parsed

from .factories import record

CONFIG = parsed(models=[model(SONNET)])  # $3 / $15 per million tokens by default


def handlers() -> Handlers:
    settings = config.from_config(CONFIG)
    return Handlers(settings, cast(Batcher, None), cast(asyncpg.Pool, None), cast(Outbox, None))


def test_a_record_with_prices_is_stored_at_them() -> None:
    router_prices = Prices(
        input=1_000_000, output=2_000_000, cache_write_5m=0, cache_write_1h=0, cache_read=0
    )
    rec = record(model=SONNET, input_tokens=1000, output_tokens=100, prices=router_prices)
    row = handlers().row_for(rec)
    assert row.cost_micros == cost_micros(rec, router_prices) == 1000 + 200
    assert row.prices["input"] == 1_000_000


def test_a_record_without_prices_is_priced_by_the_config_as_before() -> None:
    rec = record(model=SONNET, input_tokens=1000, output_tokens=100)
    row = handlers().row_for(rec)
    assert row.cost_micros == 3000 + 1500
    prices = Pricer(config.from_config(CONFIG).catalogue).prices(rec)
    assert prices is not None and row.cost_micros == cost_micros(rec, prices)


def test_the_answer_figures_of_a_cost() -> None:
    assert usd(4500) == 0.0045 and usd_text(4500) == "0.0045"
    assert usd_text(0) == "0" and usd_text(3_000_000) == "3"
    assert usd_text(1_234_567) == "1.234567" and float(usd_text(1_234_567)) == usd(1_234_567)
    assert usd_text(7) == "0.000007"  # never an exponent in the header
