"""Every Prometheus instrument of the router, declared once.

Labels stay low-cardinality: deployment names come from the configuration, outcomes and
reasons from fixed vocabularies. Per-event counters are incremented once per upstream read.
"""

from __future__ import annotations

from ezat_common.metrics import LATENCY_BUCKETS
from prometheus_client import Counter, Gauge, Histogram

REQUESTS = Counter(
    "ezat_router_requests_total",
    "Requests routed, by the deployment that answered last and how they ended.",
    ["deployment", "outcome"],
)
FAILOVERS = Counter(
    "ezat_router_failovers_total",
    "Attempts abandoned for another deployment, by the deployment left and why.",
    ["deployment", "reason"],
)
FIRST_BYTE = Histogram(
    "ezat_router_upstream_first_byte_seconds",
    "Time from sending a request to a deployment to its response headers.",
    ["deployment"],
    buckets=LATENCY_BUCKETS,
)
RELAYED_EVENTS = Counter(
    "ezat_router_relayed_events_total",
    "Upstream stream events decoded and relayed.",
)
UNKNOWN_EVENTS = Counter(
    "ezat_router_unknown_events_total",
    "Upstream stream events this gateway could not decode (forwarded unchanged).",
)
ACTIVE_STREAMS = Gauge(
    "ezat_router_active_streams",
    "Upstream responses being relayed right now.",
)
