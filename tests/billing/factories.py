"""Factories shared by the billing tests (plain functions: usable inside Hypothesis tests)."""

from __future__ import annotations

import time
import uuid
from typing import Any

import asyncpg
from ezat_billing.core.pricing import cost_micros
from ezat_billing.core.rows import UsageRow, to_row
from ezat_common.catalogue import Prices
from ezat_common.envelopes import UsageRecord

# Sonnet-like prices in micro-dollars per million tokens (USD 3 / 15 / 3.75 / 6 / 0.30).
SONNET = Prices(
    input=3_000_000,
    output=15_000_000,
    cache_write_5m=3_750_000,
    cache_write_1h=6_000_000,
    cache_read=300_000,
)


def record(**fields: Any) -> UsageRecord:
    now = time.time()
    base: dict[str, Any] = {
        "request_id": f"req_{uuid.uuid4().hex}",
        "key_id": "key_test",
        "model": "anthropic/claude-sonnet-5-5",
        "api": "messages",
        "stream": False,
        "status": "complete",
        "deployment": "dep-a",
        "region": "local",
        "input_tokens": 1000,
        "output_tokens": 100,
        "received_at": now,
        "upstream_started_at": now + 0.001,
        "first_token_at": now + 0.01,
        "finished_at": now + 0.02,
    }
    base.update(fields)
    return UsageRecord(**base)


def row(**fields: Any) -> UsageRow:
    """A row priced at Sonnet prices, as the handler would build it."""
    rec = record(**fields)
    return to_row(rec, SONNET, cost_micros(rec, SONNET))


async def count_rows(pool: asyncpg.Pool, key_id: str) -> int:
    return int(await pool.fetchval("SELECT count(*) FROM usage_records WHERE key_id=$1", key_id))
