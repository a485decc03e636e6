"""Every Prometheus instrument of the router, declared once.

Labels stay low-cardinality: deployment names come from the configuration, outcomes and
reasons from fixed vocabularies. Per-event counters are incremented once per upstream read.
"""

from __future__ import annotations

from ezat_common.metrics import LATENCY_BUCKETS, labelled
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
AFFINITY = Counter(
    "ezat_router_affinity_total",
    "Routing decisions by affinity outcome: hit, new, moved (session), prefix, none.",
    ["outcome"],
)
HEALTH_EVENTS = Counter(
    "ezat_router_health_events_total",
    "Health changes by deployment: cooldown, breaker_opened, breaker_closed, probe, ...",
    ["deployment", "event"],
)
RETRY_BUDGET_EXHAUSTED = Counter(
    "ezat_router_retry_budget_exhausted_total",
    "Extra attempts (failover, last resort) refused because the retry budget was spent.",
)
ALL_DOWN = Counter(
    "ezat_router_all_down_total",
    "Requests answered without an attempt because every deployment of the model was resting.",
    ["model"],
)
SHARED_STATE_ERRORS = Counter(
    "ezat_router_shared_state_errors_total",
    "Redis operations that failed or timed out (routing continued from hashing alone).",
    ["op"],
)
SHARED_STATE_UP = Gauge(
    "ezat_router_shared_state_up",
    "1 while Redis (bindings, shared health) is reachable, 0 while routing from hashing alone.",
)
OUTSTANDING = Gauge(
    "ezat_router_outstanding_requests",
    "Requests in flight to each deployment from this replica (least-outstanding load balance).",
    ["deployment"],
)

# Memoised children for the per-request hot path.
REQUESTS_BY = labelled(REQUESTS)
AFFINITY_BY = labelled(AFFINITY)
OUTSTANDING_BY = labelled(OUTSTANDING)
FIRST_BYTE_BY = labelled(FIRST_BYTE)
