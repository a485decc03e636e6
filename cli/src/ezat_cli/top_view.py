"""What `ezat top` shows (docs/observability.md, "`ezat top`"), computed from two readings of the
services' own /metrics: pure functions, no I/O.

A reading (``Reading``) holds every sample of every target. Rates are the difference of two
readings over the seconds between them, per target (a counter that went down means the process
restarted: it counts from zero), then summed over the targets, as Prometheus's
``sum(increase(...))`` would. Percentiles come
from the difference of histogram buckets, interpolated linearly within a bucket as PromQL's
``histogram_quantile`` does.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

Labels = tuple[tuple[str, str], ...]


Series = dict[Labels, float]


@dataclass
class Reading:
    """Every target's samples (target -> name -> labels -> value), and which targets answered."""

    at: float
    targets: dict[str, dict[str, Series]] = field(default_factory=dict)
    answered: dict[str, bool] = field(default_factory=dict)

    def add(self, target: str, text: str | None) -> None:
        """One target's exposition (None: it did not answer)."""
        self.answered[target] = text is not None
        samples: dict[str, Series] = defaultdict(dict)
        self.targets[target] = samples
        if text is None:
            return
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                samples[s.name][tuple(sorted(s.labels.items()))] = s.value

    def get(self, name: str) -> Series:
        """Gauge ``name`` summed over the targets."""
        out: Series = defaultdict(float)
        for samples in self.targets.values():
            for labels, value in samples.get(name, {}).items():
                out[labels] += value
        return dict(out)


def grouped(series: Mapping[Labels, float], by: Iterable[str]) -> dict[tuple[str, ...], float]:
    """``series`` summed by the labels ``by`` (a missing label reads as "")."""
    names = tuple(by)
    out: dict[tuple[str, ...], float] = defaultdict(float)
    for labels, value in series.items():
        d = dict(labels)
        out[tuple(d.get(n, "") for n in names)] += value
    return dict(out)


def increase(before: Reading, after: Reading, name: str) -> Series:
    """How much counter ``name`` grew, per series summed over the targets; a target whose counter
    went down restarted, and counts from zero (as PromQL's ``increase`` does per series)."""
    out: Series = defaultdict(float)
    for target, samples in after.targets.items():
        old = before.targets.get(target, {}).get(name, {})
        for labels, value in samples.get(name, {}).items():
            prior = old.get(labels, 0.0)
            out[labels] += value - prior if value >= prior else value
    return dict(out)


def quantile(q: float, buckets: Mapping[float, float]) -> float | None:
    """The ``q`` quantile of cumulative ``buckets`` (upper bound -> count), or None when empty."""
    bounds = sorted(buckets)
    if not bounds or buckets[bounds[-1]] <= 0:
        return None
    total = buckets[bounds[-1]]
    rank = q * total
    lower, below = 0.0, 0.0
    for bound in bounds:
        count = buckets[bound]
        if count >= rank:
            if math.isinf(bound):
                return lower  # PromQL answers the highest finite bound
            if count == below:
                return bound
            return lower + (bound - lower) * (rank - below) / (count - below)
        lower, below = bound, count
    return lower


def histogram_quantiles(
    before: Reading, after: Reading, name: str, by: Iterable[str], qs: Iterable[float]
) -> dict[tuple[str, ...], list[float | None]]:
    """Quantiles of histogram ``name`` over the window, grouped by the labels ``by``."""
    names = tuple(by)
    grown = increase(before, after, f"{name}_bucket")
    per: dict[tuple[str, ...], dict[float, float]] = defaultdict(lambda: defaultdict(float))
    for labels, value in grown.items():
        d = dict(labels)
        per[tuple(d.get(n, "") for n in names)][float(d["le"])] += value
    return {group: [quantile(q, b) for q in qs] for group, b in per.items()}


@dataclass(frozen=True)
class ModelLine:
    model: str
    requests: float  # per second
    ttft_p50: float | None
    ttft_p99: float | None
    tokens: float  # per second, every kind
    dollars_per_minute: float


@dataclass(frozen=True)
class DeploymentLine:
    deployment: str
    up: bool
    breaker_open: bool
    cooldown: float  # seconds left
    attempts: float  # per second
    failed: float  # attempts per second that did not succeed


@dataclass(frozen=True)
class View:
    seconds: float
    targets: dict[str, bool]
    requests: float
    errors: float  # 5xx per second
    client_errors: float  # 4xx per second
    streams: float
    in_flight: float
    ttft_p50: float | None
    ttft_p99: float | None
    models: list[ModelLine]
    deployments: list[DeploymentLine]


def view(before: Reading, after: Reading) -> View:
    """What changed between two readings, per second."""
    dt = max(after.at - before.at, 1e-9)
    status = grouped(increase(before, after, "ezat_edge_requests_total"), ["status"])
    ttft = histogram_quantiles(before, after, "ezat_edge_first_token_seconds", [], (0.5, 0.99))
    per_model_ttft = histogram_quantiles(
        before, after, "ezat_edge_first_token_seconds", ["model"], (0.5, 0.99)
    )
    requests = grouped(increase(before, after, "ezat_edge_request_seconds_count"), ["model"])
    tokens = grouped(increase(before, after, "ezat_billing_tokens_total"), ["model"])
    cost = grouped(increase(before, after, "ezat_billing_cost_micros_total"), ["model"])
    models = []
    for (model,) in sorted(set(requests) | set(tokens) | set(cost)):
        p50, p99 = per_model_ttft.get((model,), [None, None])
        models.append(
            ModelLine(
                model,
                requests.get((model,), 0.0) / dt,
                p50,
                p99,
                tokens.get((model,), 0.0) / dt,
                cost.get((model,), 0.0) / 1e6 / dt * 60,
            )
        )
    p50, p99 = ttft.get((), [None, None])
    return View(
        seconds=dt,
        targets=dict(after.answered),
        requests=sum(status.values()) / dt,
        errors=status.get(("5xx",), 0.0) / dt,
        client_errors=status.get(("4xx",), 0.0) / dt,
        streams=sum(after.get("ezat_edge_active_streams").values()),
        in_flight=sum(after.get("ezat_edge_in_flight").values()),
        ttft_p50=p50,
        ttft_p99=p99,
        models=models,
        deployments=_deployments(before, after, dt),
    )


def _per_deployment(
    reading: Reading, name: str, pick: Callable[[float, float], float]
) -> dict[str, float]:
    """Gauge ``name`` by deployment, combined over router replicas and models with ``pick``."""
    out: dict[str, float] = {}
    for samples in reading.targets.values():
        for labels, value in samples.get(name, {}).items():
            deployment = dict(labels).get("deployment", "")
            out[deployment] = pick(out[deployment], value) if deployment in out else value
    return out


def _deployments(before: Reading, after: Reading, dt: float) -> list[DeploymentLine]:
    # With several router replicas (each has its own view of health), a deployment is up only
    # if every replica takes it, its breaker open if any replica's is: what the dashboards'
    # min/max show.
    ups = _per_deployment(after, "ezat_router_deployment_up", min)
    breaker = _per_deployment(after, "ezat_router_breaker_open", max)
    longest = _per_deployment(after, "ezat_router_cooldown_remaining_seconds", max)
    attempts = grouped(
        increase(before, after, "ezat_router_attempts_total"), ["deployment", "outcome"]
    )
    lines = []
    for name in sorted(set(ups) | {d for d, _ in attempts}):
        total = sum(v for (d, _), v in attempts.items() if d == name)
        failed = sum(v for (d, o), v in attempts.items() if d == name and o != "ok")
        lines.append(
            DeploymentLine(
                name,
                up=ups.get(name, 0.0) > 0,
                breaker_open=breaker.get(name, 0.0) > 0,
                cooldown=longest.get(name, 0.0),
                attempts=total / dt,
                failed=failed / dt,
            )
        )
    return lines


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


# The two tables' columns, (title, width) in order; a column is separated from the one before it
# by one space. The first is left-aligned, the others right-aligned.
MODEL_COLUMNS = (
    ("model", 40),
    ("req/s", 8),
    ("TTFT p50", 10),
    ("TTFT p99", 10),
    ("tokens/s", 10),
    ("$/min", 9),
)
DEPLOYMENT_COLUMNS = (("deployment", 32), ("health", 16), ("attempts/s", 10), ("failed/s", 9))


def _row(columns: tuple[tuple[str, int], ...], cells: list[str]) -> str:
    (_, first), *rest = columns
    return " ".join(
        [cells[0][:first].ljust(first)]
        + [c.rjust(w) for (_, w), c in zip(rest, cells[1:], strict=True)]
    )


def cut_columns(columns: tuple[tuple[str, int], ...], width: int) -> list[str]:
    """The titles of the columns that do not fit whole in ``width`` characters."""
    end, cut = -1, []
    for title, w in columns:
        end += 1 + w
        if end > width:
            cut.append(title)
    return cut


def render(v: View, width: int | None = None) -> list[str]:
    """The screen, line by line: every line whole (``width`` None: piped, a file, a script), or
    cut at ``width`` (a terminal) with a last line naming the columns that were cut."""
    answering = sum(v.targets.values())
    down = ", ".join(sorted(t for t, ok in v.targets.items() if not ok))
    share = v.errors / v.requests if v.requests else 0.0
    lines = [
        f"EZAT Router: {answering} of {len(v.targets)} targets answering"
        + (f" (not answering: {down})" if down else ""),
        f"requests {v.requests:8.1f}/s   5xx {v.errors:6.1f}/s ({share:.1%})   "
        f"4xx {v.client_errors:6.1f}/s   streams {v.streams:.0f}   in flight {v.in_flight:.0f}",
        f"time to first token   p50 {_seconds(v.ttft_p50)}   p99 {_seconds(v.ttft_p99)}",
        "",
        _row(MODEL_COLUMNS, [title for title, _ in MODEL_COLUMNS]),
    ]
    for m in v.models:
        cells = [m.model, f"{m.requests:.1f}", _seconds(m.ttft_p50), _seconds(m.ttft_p99)]
        cells += [f"{m.tokens:.0f}", f"{m.dollars_per_minute:.4f}"]
        lines.append(_row(MODEL_COLUMNS, cells))
    lines += ["", _row(DEPLOYMENT_COLUMNS, [title for title, _ in DEPLOYMENT_COLUMNS])]
    for d in v.deployments:
        health = "up" if d.up else "breaker open" if d.breaker_open else "resting"
        if d.cooldown > 0:
            health += f" {d.cooldown:.0f}s"
        cells = [d.deployment, health.ljust(16), f"{d.attempts:.1f}", f"{d.failed:.1f}"]
        lines.append(_row(DEPLOYMENT_COLUMNS, cells))
    if width is None or all(len(line) <= width for line in lines):
        return lines
    cut = cut_columns(MODEL_COLUMNS, width) + cut_columns(DEPLOYMENT_COLUMNS, width)
    note = f"(cut to {width} columns: " + (", ".join(cut) if cut else "long lines") + ")"
    return [line[:width] for line in lines] + [note]
