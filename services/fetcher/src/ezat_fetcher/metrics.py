"""Fetcher instruments, declared once (docs/observability.md, "Fetcher")."""

from ezat_common.metrics import LATENCY_BUCKETS
from prometheus_client import Counter, Gauge, Histogram

FETCHES = Counter(
    "ezat_fetcher_fetches_total",
    "Downloads by outcome (ok, http_error, not_public, timeout, too_large, ...; busy, expired,"
    " late, cancelled, stopping: not done for the gateway's reasons, the caller may retry)",
    ["outcome"],
)
BYTES = Counter("ezat_fetcher_bytes_total", "Bytes of accepted downloads")
DURATION = Histogram(
    "ezat_fetcher_fetch_seconds",
    "Time from request to reply, by outcome",
    ["outcome"],
    buckets=LATENCY_BUCKETS,
)
# Accepted downloads' sizes: a few KiB (icons) to the 10 MiB default limit, and the 32 MiB a
# request may carry in all.
FETCHED_BYTES_BUCKETS = tuple(k * 1024 for k in (1, 4, 16, 64, 256, 1024, 2048, 5120, 10240, 32768))
FETCHED_BYTES = Histogram(
    "ezat_fetcher_fetched_bytes",
    "Sizes of accepted downloads, in bytes",
    buckets=FETCHED_BYTES_BUCKETS,
)
# Downloads that succeed, at zero from the start: a series born at its first event shows no rate
# until its second, and the refusal share (failures over all) needs its denominator.
FETCHES.labels("ok")
DURATION.labels("ok")
IN_FLIGHT = Gauge("ezat_fetcher_in_flight", "Downloads running now")
QUEUED = Gauge("ezat_fetcher_queued", "Downloads waiting for a fair share of the download slots")


def record(outcome: str, seconds: float, size: int = 0) -> None:
    FETCHES.labels(outcome).inc()
    DURATION.labels(outcome).observe(seconds)
    if size:
        BYTES.inc(size)
        FETCHED_BYTES.observe(size)
