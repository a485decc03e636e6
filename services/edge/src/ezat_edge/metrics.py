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
NO_RESPONDER = Counter(
    "ezat_edge_no_translator_total",
    "Requests answered 529/503 because no translator (or router) subscribed for a second",
)
STREAMS_COMMITTED_EARLY = Counter(
    "ezat_edge_streams_committed_early_total",
    "Streams whose 200 and pings went out before their first byte (ping_interval passed)",
)
CONNECTIONS_REFUSED = Counter(
    "ezat_edge_connections_refused_total", "Connections closed at once: max_connections reached"
)
HEAD_TIMEOUTS = Counter(
    "ezat_edge_header_timeouts_total", "Connections closed: no complete request head in time"
)
BODY_TIMEOUTS = Counter(
    "ezat_edge_body_timeouts_total", "Requests refused: the body did not arrive in time"
)
MALFORMED = Counter(
    "ezat_edge_malformed_requests_total", "Requests the HTTP parser refused (answered 400)"
)
OVERLOADED = Counter(
    "ezat_edge_overloaded_total", "Model requests refused at once: max_in_flight reached"
)
IN_FLIGHT = Gauge("ezat_edge_in_flight", "Model requests in flight")
AUTH_STALE = Counter(
    "ezat_edge_auth_stale_total", "Keys served from the cache past its TTL: database unreachable"
)
SLOW_READERS_CUT = Counter(
    "ezat_edge_slow_readers_cut_total",
    "Streams ended because their client let more than stream_buffer_bytes wait at the edge",
)
STREAM_BUFFERED = Gauge(
    "ezat_edge_stream_buffered_bytes",
    "Bytes written to open streams that their clients have not read yet (held by the edge)",
)
STREAM_BUFFERED_MAX = Gauge(
    "ezat_edge_stream_buffered_bytes_max",
    "The largest of those per stream now (at most stream_buffer_bytes)",
)
RATE_LIMITED = Counter("ezat_edge_rate_limited_total", "Requests refused by a key's limits")

# Memoised children for the per-request hot path.
REQUESTS_BY = labelled(REQUESTS)
LATENCY_BY = labelled(LATENCY)
FIRST_BYTE_BY = labelled(FIRST_BYTE)
OWNER_LOST_BY = labelled(OWNER_LOST)
