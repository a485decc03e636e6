"""Edge instruments, declared once."""

from ezat_common.metrics import LATENCY_BUCKETS, labelled
from prometheus_client import Counter, Gauge, Histogram

REQUESTS = Counter("ezat_edge_requests_total", "HTTP requests answered", ["api", "status"])
LATENCY = Histogram(
    "ezat_edge_request_seconds", "Time to the final byte", ["api"], buckets=LATENCY_BUCKETS
)
FIRST_BYTE = Histogram(
    "ezat_edge_first_byte_seconds",
    "Time to the first response byte",
    ["api"],
    buckets=LATENCY_BUCKETS,
)
ACTIVE_STREAMS = Gauge("ezat_edge_active_streams", "Streams open to clients")
DISCONNECTS = Counter("ezat_edge_client_disconnects_total", "Clients that went away mid-request")
USAGE_FALLBACKS = Counter(
    "ezat_edge_usage_fallbacks_total",
    "Held final replies whose usage the outbox did not acknowledge (billing asked directly)",
)
OWNER_LOST = Counter(
    "ezat_edge_owner_lost_total",
    "Requests whose holder (translator or router) fell silent: retried on another replica, "
    "failed after the retry, or a started stream ended with an error",
    ["outcome"],
)
STREAMS_COMMITTED_EARLY = Counter(
    "ezat_edge_streams_committed_early_total",
    "Streams whose 200 and pings went out before their first byte (ping_interval passed)",
)
RATE_LIMITED = Counter("ezat_edge_rate_limited_total", "Requests refused by a key's limits")

# Memoised children for the per-request hot path.
REQUESTS_BY = labelled(REQUESTS)
LATENCY_BY = labelled(LATENCY)
FIRST_BYTE_BY = labelled(FIRST_BYTE)
OWNER_LOST_BY = labelled(OWNER_LOST)
