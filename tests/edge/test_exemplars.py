"""The exemplar hook of the edge's latency histograms (docs/observability.md, "Edge"): a request
that knows its trace id leaves it on the buckets it lands in, which an OpenMetrics scrape shows;
one without leaves none. In this process's registry (the edge's instruments, not a running edge:
no trace id reaches a request until tracing exists)."""

from __future__ import annotations

from ezat_common.metrics import exposition
from ezat_edge import metrics as m
from prometheus_client.openmetrics.parser import text_string_to_metric_families

OPENMETRICS = "application/openmetrics-text; version=1.0.0"
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def exemplars(model: str) -> dict[tuple[str, str], dict[str, str]]:
    """(series, le) -> the exemplar's labels, of ``model``'s anthropic latency buckets."""
    text, content_type = exposition(OPENMETRICS)
    assert content_type.startswith("application/openmetrics-text")
    found = {}
    for family in text_string_to_metric_families(text.decode()):
        for s in family.samples:
            if s.labels.get("model") == model and s.exemplar is not None:
                found[(s.name, s.labels["le"])] = s.exemplar.labels
    return found


def test_a_known_trace_id_becomes_the_exemplar_of_both_latencies() -> None:
    meters = m.METERS["anthropic"].model("exemplar-test-traced")
    meters.observe(0.3, 0.2, TRACE)
    assert exemplars("exemplar-test-traced") == {
        ("ezat_edge_request_seconds_bucket", "0.5"): {"trace_id": TRACE},
        ("ezat_edge_first_token_seconds_bucket", "0.25"): {"trace_id": TRACE},
    }


def test_without_a_trace_id_no_exemplar_is_attached() -> None:
    meters = m.METERS["anthropic"].model("exemplar-test-untraced")
    meters.observe(0.3, 0.2, None)
    assert exemplars("exemplar-test-untraced") == {}
    text, _ = exposition(OPENMETRICS)
    assert b'model="exemplar-test-untraced"' in text  # observed all the same
