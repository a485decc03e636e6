"""The request path's lean instruments (ezat_common.lean_metrics) export exactly what
prometheus_client's own would for the same updates, in both exposition formats, exemplars
included: dashboards, rules and `ezat top` cannot tell them apart."""

from __future__ import annotations

import re

import pytest
from ezat_common.lean_metrics import LeanCounter, LeanGauge, LeanHistogram
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as openmetrics

BUCKETS = (0.001, 0.01, 0.1, 1.0, 2.5, 30.0)
LABELS = st.sampled_from([("a", "x"), ("a", "y"), ("b", "x")])
AMOUNTS = st.floats(min_value=0, max_value=100, allow_nan=False) | st.sampled_from(BUCKETS)
UPDATES = st.lists(st.tuples(LABELS, AMOUNTS, st.booleans()), max_size=30)

# Creation and exemplar timestamps differ by when each object was made, nothing else.
_CREATED = re.compile(rb"(_created(?:\{[^}]*\})?) [0-9.e+]+")
_EXEMPLAR_TIME = re.compile(rb"(# \{[^}]*\} [0-9.e+-]+) [0-9.e+]+")


def _normal(text: bytes) -> bytes:
    return _EXEMPLAR_TIME.sub(rb"\1", _CREATED.sub(rb"\1", text))


def _both(registry_a: CollectorRegistry, registry_b: CollectorRegistry) -> None:
    assert _normal(generate_latest(registry_a)) == _normal(generate_latest(registry_b))
    assert _normal(openmetrics(registry_a)) == _normal(openmetrics(registry_b))


@given(UPDATES)
def test_a_histogram_exports_what_prometheus_clients_does(updates) -> None:
    theirs, ours = CollectorRegistry(), CollectorRegistry()
    reference = Histogram("h_seconds", "doc", ["api", "model"], registry=theirs, buckets=BUCKETS)
    lean = LeanHistogram("h_seconds", "doc", ["api", "model"], registry=ours, buckets=BUCKETS)
    for labels, amount, traced in updates:
        exemplar = {"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736"} if traced else None
        reference.labels(*labels).observe(amount, exemplar)
        lean.labels(*labels).observe(amount, exemplar)
    _both(theirs, ours)


@given(st.lists(st.tuples(LABELS, AMOUNTS), max_size=30))
def test_a_counter_exports_what_prometheus_clients_does(updates) -> None:
    theirs, ours = CollectorRegistry(), CollectorRegistry()
    reference = Counter("c_total", "doc", ["api", "model"], registry=theirs)
    lean = LeanCounter("c_total", "doc", ["api", "model"], registry=ours)
    for labels, amount in updates:
        reference.labels(*labels).inc(amount)
        lean.labels(*labels).inc(amount)
    _both(theirs, ours)


@given(st.lists(st.tuples(st.sampled_from(["inc", "dec", "set"]), AMOUNTS), max_size=30))
def test_a_gauge_exports_what_prometheus_clients_does(updates) -> None:
    theirs, ours = CollectorRegistry(), CollectorRegistry()
    reference = Gauge("g", "doc", registry=theirs)
    lean = LeanGauge("g", "doc", registry=ours)
    for op, amount in updates:
        getattr(reference, op)(amount)
        getattr(lean, op)(amount)
    _both(theirs, ours)


@given(st.lists(AMOUNTS, max_size=10))
def test_unlabelled_instruments_export_from_their_birth(amounts) -> None:
    theirs, ours = CollectorRegistry(), CollectorRegistry()
    references = Counter("c_total", "doc", registry=theirs), Histogram("h", "doc", registry=theirs)
    leans = (
        LeanCounter("c_total", "doc", registry=ours),
        LeanHistogram("h", "doc", registry=ours, buckets=Histogram.DEFAULT_BUCKETS),
    )
    for amount in amounts:
        for counter, histogram in (references, leans):
            counter.inc(amount)
            histogram.observe(amount)
    _both(theirs, ours)


def test_children_are_bound_once_and_labels_are_checked() -> None:
    lean = LeanCounter("c_total", "doc", ["api"], registry=CollectorRegistry())
    assert lean.labels("openai") is lean.labels("openai")
    with pytest.raises(ValueError, match="takes labels"):
        lean.labels("openai", "extra")
    with pytest.raises(ValueError, match="only go up"):
        lean.labels("openai").inc(-1)


def test_a_name_already_registered_is_refused() -> None:
    registry = CollectorRegistry()
    Counter("dup_total", "doc", registry=registry)
    with pytest.raises(ValueError, match="Duplicated"):
        LeanCounter("dup_total", "doc", registry=registry)
