"""Prometheus helpers shared by the services: the exposition, common buckets, and the
instruments of rules that live in ``ezat_common`` (the metrics port's server is readiness.py's).

Each service declares its own instruments once, in its own ``metrics.py``. Everything is in the
default registry, which also holds prometheus_client's process, platform and GC collectors, so
every service's ``/metrics`` carries ``process_resident_memory_bytes`` and the like. Shared series
have no label naming the service: each process is its own scrape target (docs/observability.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prometheus_client import REGISTRY, Counter, Gauge
from prometheus_client.exposition import choose_encoder

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)

UNDECODABLE = Counter(
    "ezat_undecodable_messages_total",
    "NATS messages that could not be decoded, by message kind (undecodable.py)",
    ["message"],
)


# The NATS connection of a service (bus.connect; CLI connections are not counted).
NATS_CONNECTED = Gauge(
    "ezat_nats_connected",
    "1 while the process's NATS connection is up, 0 while it is reconnecting or not made yet",
)
NATS_DISCONNECTS = Counter(
    "ezat_nats_disconnects_total",
    "NATS connections lost (not counting the process's own close at shutdown)",
)
NATS_RECONNECTS = Counter(
    "ezat_nats_reconnects_total",
    "NATS connections re-established after a loss, to the same server or another of the cluster",
)
NATS_SLOW_CONSUMER_ERRORS = Counter(
    "ezat_nats_slow_consumer_errors_total",
    "Messages the NATS client dropped because a subscription's pending limits were full "
    "(nats-py reports one slow-consumer error per dropped message)",
)

# Fed by readiness.Readiness, the one judge of every service's /readyz.
READY = Gauge(
    "ezat_ready",
    "1 while this process's own /readyz answers ready (its NATS connection, subscriptions and "
    "own stores), else 0; other services' replicas never count (docs/observability.md)",
)


def exposition(accept: str | None = None) -> tuple[bytes, str]:
    """The default registry's text and its content type, in the format the scraper's ``Accept``
    header asks for: OpenMetrics (the only format that carries exemplars) for
    ``application/openmetrics-text``, which Prometheus asks for, else the classic text format.

    The choice is prometheus_client's own ``choose_encoder``, the one its ``start_http_server``
    (``make_wsgi_app``) makes for every scrape; ``readiness.serve`` answers with it, so every
    service answers a scraper alike."""
    encode, content_type = choose_encoder(accept or "")
    return encode(REGISTRY), content_type


def labelled(metric: Any) -> Callable[..., Any]:
    """A getter of the metric's child for some label values, memoised: ``labels()`` costs
    microseconds per call, and the hot path asks for the same few children every request."""
    children: dict[tuple[str, ...], Any] = {}

    def child(*values: str) -> Any:
        found = children.get(values)
        if found is None:
            found = children[values] = metric.labels(*values)
        return found

    return child
