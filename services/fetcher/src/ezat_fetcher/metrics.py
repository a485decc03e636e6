"""Fetcher instruments, declared once."""

from ezat_common.metrics import LATENCY_BUCKETS
from prometheus_client import Counter, Gauge, Histogram

FETCHES = Counter(
    "ezat_fetcher_fetches_total",
    "Downloads by outcome (ok, http_error, not_public, timeout, too_large, ...)",
    ["outcome"],
)
BYTES = Counter("ezat_fetcher_bytes_total", "Bytes of accepted downloads")
DURATION = Histogram(
    "ezat_fetcher_fetch_seconds",
    "Time from request to reply, by outcome",
    ["outcome"],
    buckets=LATENCY_BUCKETS,
)
IN_FLIGHT = Gauge("ezat_fetcher_in_flight", "Downloads running now")


def record(outcome: str, seconds: float, size: int = 0) -> None:
    FETCHES.labels(outcome).inc()
    DURATION.labels(outcome).observe(seconds)
    if size:
        BYTES.inc(size)
