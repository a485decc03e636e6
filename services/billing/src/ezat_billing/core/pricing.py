"""What a usage record costs: the computation lives in ``ezat_common.pricing`` (the router prices
the answer with it, billing the row: one computation); re-exported here for billing's callers."""

from __future__ import annotations

from ezat_common.pricing import FREE, cost_micros, prices_for, prices_json

__all__ = ["FREE", "cost_micros", "prices_for", "prices_json"]
