"""Counters and histograms for the request path, exported exactly as prometheus_client's own
(same names, samples, ``_created`` and exemplars) but an order of magnitude cheaper to update
(docs/performance.md, "Issue 15's observability").

prometheus_client guards every value with a lock so that any thread may write it: a histogram's
``observe`` costs about 0.8 µs (a sum, a linear bucket scan and two locked increments) and a
counter's ``inc`` 0.35 µs. A request crosses a dozen of them, which came to 5 % of the gateway's
CPU per request. Here a child is a plain list updated by its one writer, the service's event
loop; the scrape, which runs on the metrics server's thread, only reads, so under the GIL it
can at worst see one observation's bucket before its sum. Instruments written from other
threads keep prometheus_client's types.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Iterator, Sequence
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.samples import Exemplar
from prometheus_client.utils import floatToGoString


class _Family:
    """A named, labelled instrument registered in the default registry; its children are bound
    by ``labels`` (memoised, so the hot path may call it every request)."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str] = (),
        registry: CollectorRegistry = REGISTRY,
    ) -> None:
        self._name = name
        self._documentation = documentation
        self._labelnames = tuple(labelnames)
        self._children: dict[tuple[str, ...], Any] = {}
        if not self._labelnames:
            self.labels()  # prometheus_client exports an unlabelled instrument from its birth
        registry.register(self)

    def _child(self) -> Any:
        raise NotImplementedError

    def labels(self, *values: str) -> Any:
        found = self._children.get(values)
        if found is None:
            if len(values) != len(self._labelnames):
                raise ValueError(f"{self._name} takes labels {self._labelnames}, got {values}")
            found = self._children[values] = self._child()
        return found

    def describe(self) -> list[Metric]:
        # The registry asks at registration to refuse a clash of names with another collector.
        return [self._family()]

    def collect(self) -> Iterator[Metric]:
        family = self._family()
        for values, child in list(self._children.items()):
            self._add(family, values, child)
        yield family

    def _family(self) -> Metric:
        raise NotImplementedError

    def _add(self, family: Any, values: tuple[str, ...], child: Any) -> None:
        """One child's samples into ``family`` (the scrape's copy of its values)."""
        raise NotImplementedError


class _Child:
    __slots__ = ("created",)

    def __init__(self) -> None:
        self.created = time.time()


class CounterChild(_Child):
    __slots__ = ("value",)

    def __init__(self) -> None:
        super().__init__()
        self.value = 0.0

    def inc(self, amount: float = 1.0) -> None:
        if amount < 0:
            raise ValueError("counters only go up")
        self.value += amount


class LeanCounter(_Family):
    """prometheus_client's ``Counter``, labelled, written from the event loop only."""

    def _child(self) -> CounterChild:
        return CounterChild()

    def labels(self, *values: str) -> CounterChild:
        return super().labels(*values)  # type: ignore[no-any-return]

    def inc(self, amount: float = 1.0) -> None:
        """For an instrument without labels."""
        self.labels().inc(amount)

    def _family(self) -> CounterMetricFamily:
        return CounterMetricFamily(self._name, self._documentation, labels=self._labelnames)

    def _add(self, family: Any, values: tuple[str, ...], child: CounterChild) -> None:
        family.add_metric(values, child.value, created=child.created)


class HistogramChild(_Child):
    __slots__ = ("_bounds", "counts", "exemplars", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        super().__init__()
        self._bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last one is +Inf's
        self.exemplars: list[Exemplar | None] = [None] * (len(bounds) + 1)
        self.sum = 0.0

    def observe(self, amount: float, exemplar: dict[str, str] | None = None) -> None:
        # bisect_left: the first bound >= amount, as prometheus_client's `amount <= bound`.
        index = bisect_left(self._bounds, amount)
        self.counts[index] += 1
        self.sum += amount
        if exemplar:
            self.exemplars[index] = Exemplar(exemplar, amount, time.time())


class LeanHistogram(_Family):
    """prometheus_client's ``Histogram``, labelled, written from the event loop only; exemplars
    as its own (the last per bucket, OpenMetrics only)."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str] = (),
        registry: CollectorRegistry = REGISTRY,
        *,
        buckets: Sequence[float],
    ) -> None:
        self._bounds = tuple(float(b) for b in buckets if b != float("inf"))
        if list(self._bounds) != sorted(set(self._bounds)):
            raise ValueError(f"{name}: buckets must increase")
        go = floatToGoString  # the `le` spelling prometheus_client writes
        self._les = (*(go(b) for b in self._bounds), "+Inf")  # type: ignore[no-untyped-call]
        super().__init__(name, documentation, labelnames, registry)

    def _child(self) -> HistogramChild:
        return HistogramChild(self._bounds)

    def labels(self, *values: str) -> HistogramChild:
        return super().labels(*values)  # type: ignore[no-any-return]

    def observe(self, amount: float, exemplar: dict[str, str] | None = None) -> None:
        """For an instrument without labels."""
        self.labels().observe(amount, exemplar)

    def _family(self) -> HistogramMetricFamily:
        return HistogramMetricFamily(self._name, self._documentation, labels=self._labelnames)

    def _add(self, family: Any, values: tuple[str, ...], child: HistogramChild) -> None:
        counts, exemplars, total = list(child.counts), list(child.exemplars), child.sum
        buckets: list[tuple[str, float] | tuple[str, float, Exemplar]] = []
        cumulative = 0
        for le, count, exemplar in zip(self._les, counts, exemplars, strict=True):
            cumulative += count
            buckets.append((le, cumulative) if exemplar is None else (le, cumulative, exemplar))
        family.add_metric(values, buckets, total)
        # HistogramMetricFamily has no `created` argument; the sample is prometheus_client's.
        labels = dict(zip(self._labelnames, values, strict=True))
        family.add_sample(f"{self._name}_created", labels, child.created)


class GaugeChild:
    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1.0) -> None:
        self.value += amount

    def dec(self, amount: float = 1.0) -> None:
        self.value -= amount

    def set(self, value: float) -> None:
        self.value = value


class LeanGauge(_Family):
    """prometheus_client's ``Gauge`` (inc, dec, set), written from the event loop only."""

    def _child(self) -> GaugeChild:
        return GaugeChild()

    def labels(self, *values: str) -> GaugeChild:
        return super().labels(*values)  # type: ignore[no-any-return]

    def inc(self, amount: float = 1.0) -> None:
        self.labels().inc(amount)

    def dec(self, amount: float = 1.0) -> None:
        self.labels().dec(amount)

    def set(self, value: float) -> None:
        self.labels().set(value)

    def _family(self) -> GaugeMetricFamily:
        return GaugeMetricFamily(self._name, self._documentation, labels=self._labelnames)

    def _add(self, family: Any, values: tuple[str, ...], child: GaugeChild) -> None:
        family.add_metric(values, child.value)
