"""Factories shared by the billing tests (plain functions: usable inside Hypothesis tests)."""

from __future__ import annotations

import time
import uuid
from typing import Any

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
