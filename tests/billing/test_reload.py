"""Billing's part of a config reload (``config.reload``): a record that carries no prices is
priced at the reloaded config's, and so are the price gauges' source."""

from __future__ import annotations

from pathlib import Path

from ezat_billing import config
from ezat_common.config import parse_config
from ezat_common.pricing import Pricer

from .factories import record

SHIPPED = (Path(__file__).resolve().parents[2] / "config" / "ezat.toml").read_text()


def test_a_reload_prices_the_next_records_at_the_new_price() -> None:
    settings = config.from_config(parse_config(SHIPPED))
    pricer = Pricer(settings.catalogue)  # as the handlers hold it, built once
    rec = record(model="claude-instant", deployment="local-instant-b")
    assert pricer.prices(rec).input == 800_000  # type: ignore[union-attr]
    new = parse_config(SHIPPED.replace("input = 0.8, output = 4.0", "input = 8.0, output = 40.0"))
    config.reload(settings, new)
    assert pricer.prices(rec).input == 8_000_000  # type: ignore[union-attr]
    assert settings.prices["anthropic/claude-instant-sim"].output == 40_000_000
