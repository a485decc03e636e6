"""Every Prometheus instrument of the router, declared once (docs/observability.md, "Router").

Labels stay low-cardinality: deployment names, kinds and models come from the configuration,
outcomes and reasons from fixed vocabularies. Per-event counters are incremented once per
upstream read; the per-deployment children an attempt touches are bound once
(``DeploymentSeries``), and the health gauges are read from the health board at scrape time
(``watch_health``), so routing does no metric work for them.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ezat_common.config import DeploymentConfig
from ezat_common.lean_metrics import LeanCounter, LeanGauge, LeanHistogram
from ezat_common.metrics import LATENCY_BUCKETS, labelled
from prometheus_client import REGISTRY, Counter, Gauge
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

from .core.accounting import UsageAccumulator
from .core.health import DeploymentHealth, availability
from .core.upstream_errors import AttemptFailure

if TYPE_CHECKING:
    from .credentials import RefreshStats

REQUESTS = LeanCounter(
    "ezat_router_requests_total",
    "Requests routed, by the deployment that answered last and how they ended.",
    ["deployment", "outcome"],
)
FAILOVERS = LeanCounter(
    "ezat_router_failovers_total",
    "Attempts abandoned for another deployment, by the deployment left and why.",
    ["deployment", "reason"],
)
FIRST_BYTE = LeanHistogram(
    "ezat_router_upstream_first_byte_seconds",
    "Time from sending a request to a deployment to its response headers.",
    ["deployment"],
    buckets=LATENCY_BUCKETS,
)
DROPPED = LeanCounter(
    "ezat_router_dropped_total",
    "anthropic-beta values (what=beta) and body fields (what=field) a deployment's kind refuses, "
    "dropped from its requests: one per value per request (the log names only a few).",
    ["deployment", "what"],
)
RELAYED_EVENTS = LeanCounter(
    "ezat_router_relayed_events_total",
    "Upstream stream events decoded and relayed.",
)
UNKNOWN_EVENTS = LeanCounter(
    "ezat_router_unknown_events_total",
    "Upstream stream events this gateway could not decode (forwarded unchanged).",
)
ACTIVE_STREAMS = LeanGauge(
    "ezat_router_active_streams",
    "Upstream responses being relayed right now.",
)
AFFINITY = LeanCounter(
    "ezat_router_affinity_total",
    "Routing decisions by affinity outcome: hit, new, moved (session), prefix, none.",
    ["outcome"],
)
HEALTH_EVENTS = Counter(
    "ezat_router_health_events_total",
    "Health changes by deployment: cooldown, breaker_opened, breaker_closed, probe, ...",
    ["deployment", "event"],
)
COUNT_ESTIMATES = Counter(
    "ezat_router_count_estimates_total",
    "count_tokens answered with the translator's estimate: no deployment of the model can count.",
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
OUTSTANDING = LeanGauge(
    "ezat_router_outstanding_requests",
    "Requests in flight to each deployment from this replica (least-outstanding load balance).",
    ["deployment"],
)

ATTEMPTS = LeanCounter(
    "ezat_router_attempts_total",
    "Upstream attempts (failed ones and those failed over from included), by deployment, its"
    " kind and how the attempt ended: ok, error_4xx, error_5xx, overloaded, rate_limited,"
    " timeout, connect_error, cancelled.",
    ["deployment", "kind", "outcome"],
)
PROMPT_TOKENS = LeanCounter(
    "ezat_router_prompt_tokens_total",
    "Input tokens the deployments reported (once per attempt that reported usage), by kind:"
    " uncached, cache_read, cache_write.",
    ["deployment", "kind"],
)
DEPLOYMENT_UP = Gauge(
    "ezat_router_deployment_up",
    "1 while this replica sends the deployment traffic, 0 while it cools down (429) or its"
    " breaker is open or half-open; read from this replica's health board at scrape time.",
    ["deployment", "model"],
)
BREAKER_OPEN = Gauge(
    "ezat_router_breaker_open",
    "1 while the deployment's circuit breaker is open or half-open (not yet closed by a probe).",
    ["deployment"],
)
COOLDOWN_REMAINING = Gauge(
    "ezat_router_cooldown_remaining_seconds",
    "Seconds until the deployment's rate-limit cooldown (429) ends, 0 when it is not cooling.",
    ["deployment"],
)

# AttemptFailure.reason -> attempt outcome. "auth" is the deployment's 401/403; "stalled" is a
# stream gone silent; "dropped" a connection cut mid-response; "protocol" a response that was not
# SSE/JSON; "unrecorded" a deployment that answered whose usage record could not be made durable.
ATTEMPT_OUTCOMES = (
    "ok",
    "error_4xx",
    "error_5xx",
    "overloaded",
    "rate_limited",
    "timeout",
    "connect_error",
    "cancelled",
)
OUTCOME_OF_REASON = {
    "429": "rate_limited",
    "529": "overloaded",
    "5xx": "error_5xx",
    "4xx": "error_4xx",
    "auth": "error_4xx",
    "timeout": "timeout",
    "stalled": "timeout",
    "connect": "connect_error",
    "dropped": "connect_error",
    "protocol": "error_5xx",
    "unrecorded": "ok",
}


class DeploymentSeries:
    """One deployment's attempt and prompt-token children, bound once: an attempt costs a dict
    look-up and one to four counter increments, no ``labels()`` call."""

    __slots__ = ("_attempts", "cache_read", "cache_write", "first_byte", "uncached")

    def __init__(self, deployment: str, kind: str) -> None:
        self._attempts = {o: ATTEMPTS.labels(deployment, kind, o) for o in ATTEMPT_OUTCOMES}
        # Bound at zero from the start, though routing labels them itself: a series born at its
        # first event shows no rate until its second (Prometheus cannot tell it grew), and a
        # healthy deployment's failovers and health events read 0, not "no data".
        for reason in OUTCOME_OF_REASON:
            FAILOVERS.labels(deployment, reason)
        for event in HEALTH_EVENT_NAMES:
            HEALTH_EVENTS.labels(deployment, event)
        self.first_byte = FIRST_BYTE.labels(deployment)
        self.uncached = PROMPT_TOKENS.labels(deployment, "uncached")
        self.cache_read = PROMPT_TOKENS.labels(deployment, "cache_read")
        self.cache_write = PROMPT_TOKENS.labels(deployment, "cache_write")

    def attempted(self, failure: AttemptFailure | None) -> None:
        outcome = "ok" if failure is None else OUTCOME_OF_REASON.get(failure.reason, "error_5xx")
        self._attempts[outcome].inc()

    def cancelled(self) -> None:
        self._attempts["cancelled"].inc()

    def prompt(self, usage: UsageAccumulator) -> None:
        """The attempt's input tokens as the deployment reported them (nothing if it did not)."""
        if usage.input_tokens is None:
            return
        self.uncached.inc(usage.input_tokens)
        if usage.cache_read:
            self.cache_read.inc(usage.cache_read)
        written = sum(usage.cache_writes())
        if written:
            self.cache_write.inc(written)


def watch_health(
    deployments: Iterable[DeploymentConfig],
    health: Callable[[str], DeploymentHealth],
    clock: Callable[[], float],
) -> None:
    """Bind the health gauges of ``deployments`` to ``health`` (the router's board), evaluated
    when Prometheus scrapes. A later call (another router in the same process: a test) rebinds."""
    for dep in deployments:
        name = dep.name

        def up(name: str = name) -> float:
            return 1.0 if availability(health(name), clock()) == "up" else 0.0

        def breaker(name: str = name) -> float:
            return 1.0 if health(name).open_until > 0.0 else 0.0

        def cooling(name: str = name) -> float:
            return max(health(name).cooldown_until - clock(), 0.0)

        DEPLOYMENT_UP.labels(name, dep.model).set_function(up)
        ALL_DOWN.labels(dep.model)  # at zero from the start (DeploymentSeries says why)
        BREAKER_OPEN.labels(name).set_function(breaker)
        COOLDOWN_REMAINING.labels(name).set_function(cooling)


def unwatch_health(deployments: Iterable[DeploymentConfig]) -> None:
    """Drop the health gauges of ``deployments`` (removed by a config reload): a deployment no
    longer configured must not read as up."""
    for dep in deployments:
        for gauge, labels in (
            (DEPLOYMENT_UP, (dep.name, dep.model)),
            (BREAKER_OPEN, (dep.name,)),
            (COOLDOWN_REMAINING, (dep.name,)),
        ):
            with contextlib.suppress(KeyError):
                gauge.remove(*labels)


HEALTH_EVENT_NAMES = (
    "cooldown",
    "breaker_opened",
    "breaker_closed",
    "probe",
    "breaker_opened_elsewhere",
)
AFFINITY_OUTCOMES = ("hit", "new", "moved", "prefix", "none")
for _outcome in AFFINITY_OUTCOMES:
    AFFINITY.labels(_outcome)  # at zero from the start (DeploymentSeries says why)

# Memoised children for the per-request hot path.
REQUESTS_BY = labelled(REQUESTS)
AFFINITY_BY = labelled(AFFINITY)
OUTSTANDING_BY = labelled(OUTSTANDING)


class _CredentialSeries:
    """The upstream credentials' refresh state, read at scrape time from the deployments'
    ``Credentials`` (credentials/): how long the one in use has left, and how its refreshes went.
    Static keys have no such state and no series."""

    def __init__(self) -> None:
        self.sources: dict[str, Callable[[], RefreshStats | None]] = {}
        self.clock: Callable[[], float] = time.time

    def describe(self) -> list[Metric]:
        return list(self._families())

    def collect(self) -> Iterator[Metric]:
        left, refreshes = self._families()
        now = self.clock()
        for deployment, stats_of in list(self.sources.items()):
            stats = stats_of()
            if stats is None:
                continue
            if stats.expires_at is not None:
                left.add_metric([deployment], max(stats.expires_at - now, 0.0))
            refreshes.add_metric([deployment, "ok"], stats.refreshes)
            refreshes.add_metric([deployment, "failed"], stats.failures)
        yield left
        yield refreshes

    @staticmethod
    def _families() -> tuple[GaugeMetricFamily, CounterMetricFamily]:
        return (
            GaugeMetricFamily(
                "ezat_router_credential_seconds_left",
                "Seconds until the upstream credential a deployment signs with expires (SigV4's "
                "temporary AWS credentials, Google access tokens); refreshed well before 0",
                labels=["deployment"],
            ),
            CounterMetricFamily(
                "ezat_router_credential_refreshes",
                "Background refreshes of a deployment's upstream credential, by outcome (ok, "
                "failed: the old one is kept until it expires); shared sources count for each "
                "deployment that uses them",
                labels=["deployment", "outcome"],
            ),
        )


CREDENTIALS = _CredentialSeries()
REGISTRY.register(CREDENTIALS)


def watch_credentials(signers: Mapping[str, Any]) -> None:
    """Read ``signers`` (deployment -> ``Credentials``) at every scrape; a later call rebinds."""
    CREDENTIALS.sources = {name: c.stats for name, c in signers.items()}
