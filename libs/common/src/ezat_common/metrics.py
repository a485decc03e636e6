"""Prometheus helpers shared by the services: the metrics HTTP endpoint, common buckets, and the
instruments of rules that live in ``ezat_common``.

Each service declares its own instruments once, in its own ``metrics.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    Counter,
    generate_latest,
    start_http_server,
)

from .config import split_listen

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)

UNDECODABLE = Counter(
    "ezat_undecodable_messages_total",
    "NATS messages that could not be decoded, by message kind (undecodable.py)",
    ["message"],
)


def exposition() -> tuple[bytes, str]:
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST


def serve(listen: str | None) -> None:
    """Expose /metrics on its own port (what a pod's scrape annotation points at)."""
    if listen:
        host, port = split_listen(listen)
        start_http_server(port, addr=host)


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
