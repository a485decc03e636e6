"""Translator instruments, declared once."""

from ezat_common.metrics import labelled
from prometheus_client import Counter

REQUESTS = Counter("ezat_translator_requests_total", "Client requests translated", ["api"])
REJECTED = Counter(
    "ezat_translator_rejected_total", "Client requests refused before routing", ["api", "status"]
)
ROUTER_LOST = Counter(
    "ezat_translator_router_lost_total",
    "Chat requests whose router fell silent (retried: sent to another; failed: edge told)",
    ["outcome"],
)
NO_ROUTER = Counter("ezat_translator_no_router_total", "Requests that found no router listening")

# Memoised children for the per-request hot path.
REQUESTS_BY = labelled(REQUESTS)
