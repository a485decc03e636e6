"""Edge instruments, declared once (docs/observability.md, "Edge"), and the children a request
observes, bound once per API (``METERS``) and per API and model (``ApiMeters.model``)."""

from __future__ import annotations

from collections.abc import Iterable

from ezat_common.lean_metrics import LeanCounter, LeanGauge, LeanHistogram
from ezat_common.metrics import LATENCY_BUCKETS, labelled
from prometheus_client import Counter, Gauge

from .core.model_label import OTHER

# Body sizes: powers of 4 from 256 B to 16 MiB, then the default body limit (32 MiB).
BYTE_BUCKETS = (*(4.0**n for n in range(4, 13)), 32.0 * 1024**2)
STATUS_CLASSES = ("2xx", "3xx", "4xx", "5xx")

REQUESTS = LeanCounter(
    "ezat_edge_requests_total", "Model calls answered, by API and status class", ["api", "status"]
)
REQUEST_SECONDS = LeanHistogram(
    "ezat_edge_request_seconds",
    "Model calls handed to the gateway: from their arrival to their last byte",
    ["api", "model"],
    buckets=LATENCY_BUCKETS,
)
FIRST_TOKEN = LeanHistogram(
    "ezat_edge_first_token_seconds",
    "Model calls: from their arrival to the first content event written to the client (a "
    "stream's first text, tool or thinking delta; a non-streamed answer's body)",
    ["api", "model"],
    buckets=LATENCY_BUCKETS,
)
REQUEST_BYTES = LeanHistogram(
    "ezat_edge_request_body_bytes",
    "Model calls' request bodies, read",
    ["api"],
    buckets=BYTE_BUCKETS,
)
RESPONSE_BYTES = LeanHistogram(
    "ezat_edge_response_body_bytes",
    "Model calls' response bodies, as written (a stream: every byte of its events)",
    ["api"],
    buckets=BYTE_BUCKETS,
)
FINAL_HOLD = LeanHistogram(
    "ezat_edge_final_hold_seconds",
    "From the final reply (message_stop, [DONE], a JSON body) reaching the edge to its being "
    "written: the wait for its usage to be durable",
    ["api"],
    buckets=LATENCY_BUCKETS,
)
ACTIVE_STREAMS = LeanGauge("ezat_edge_active_streams", "Streams open to clients")
DISCONNECTS = LeanCounter(
    "ezat_edge_client_disconnects_total", "Clients that went away mid-request", ["api"]
)
USAGE_FALLBACKS = Counter(
    "ezat_edge_usage_fallbacks_total",
    "Held final replies whose usage the outbox did not acknowledge (billing asked directly)",
)
OWNER_LOST = Counter(
    "ezat_edge_owner_lost_total",
    "Requests whose holder (translator or router) fell silent: retried on another replica, "
    "failed after the retry, or a started stream ended with an error",
    ["outcome"],
)
NO_RESPONDER = Counter(
    "ezat_edge_no_translator_total",
    "Requests answered 529/503 because no translator (or router) subscribed for a second",
)
STREAMS_COMMITTED_EARLY = Counter(
    "ezat_edge_streams_committed_early_total",
    "Streams whose 200 and pings went out before their first byte (ping_interval passed)",
)
CONNECTIONS_REFUSED = Counter(
    "ezat_edge_connections_refused_total", "Connections closed at once: max_connections reached"
)
HEAD_TIMEOUTS = Counter(
    "ezat_edge_header_timeouts_total", "Connections closed: no complete request head in time"
)
BODY_TIMEOUTS = Counter(
    "ezat_edge_body_timeouts_total", "Requests refused: the body did not arrive in time"
)
MALFORMED = Counter(
    "ezat_edge_malformed_requests_total", "Requests the HTTP parser refused (answered 400)"
)
OVERLOADED = Counter(
    "ezat_edge_overloaded_total", "Model requests refused at once: max_in_flight reached"
)
IN_FLIGHT = Gauge("ezat_edge_in_flight", "Model requests in flight")
AUTH_STALE = Counter(
    "ezat_edge_auth_stale_total", "Keys served from the cache past its TTL: database unreachable"
)
SLOW_READERS_CUT = Counter(
    "ezat_edge_slow_readers_cut_total",
    "Streams ended because their client let more than stream_buffer_bytes wait at the edge",
)
STREAM_BUFFERED = Gauge(
    "ezat_edge_stream_buffered_bytes",
    "Bytes written to open streams that their clients have not read yet (held by the edge)",
)
STREAM_BUFFERED_MAX = Gauge(
    "ezat_edge_stream_buffered_bytes_max",
    "The largest of those per stream now (at most stream_buffer_bytes)",
)
BODY_BYTES = Gauge(
    "ezat_edge_body_bytes_in_flight",
    "Request-body bytes this edge holds for requests in progress (at most body_bytes_in_flight)",
)
BODY_BYTES_REFUSED = LeanCounter(
    "ezat_edge_body_bytes_refused_total",
    "Requests refused 529/503 because their body would pass a limit of body bytes in flight: "
    "the key's (body_bytes_in_flight_per_key) or the edge's (body_bytes_in_flight)",
    ["limit"],
)
BODY_BYTES_REFUSED_BY = {limit: BODY_BYTES_REFUSED.labels(limit) for limit in ("key", "edge")}
UNREAD_ANSWERS_DROPPED = Counter(
    "ezat_edge_unread_answers_dropped_total",
    "Non-streamed answers dropped, their connection closed, because their client had not taken "
    "them within unread_answer_grace",
)
RATE_LIMITED = LeanCounter(
    "ezat_edge_rate_limited_total",
    "Requests refused 429 by a key's limits, by the limit: requests (rpm) or tokens (tpm)",
    ["limit"],
)
RATE_LIMITED_REQUESTS = RATE_LIMITED.labels("requests")
RATE_LIMITED_TOKENS = RATE_LIMITED.labels("tokens")
BUDGET_REFUSED = Counter(
    "ezat_edge_budget_refused_total",
    "Requests refused 403: their key's or team's monthly budget is used, or has too little left "
    "for the request's worst case once the holds of requests in progress count",
)
BUDGET_HOLD_UNAVAILABLE = Counter(
    "ezat_edge_budget_hold_unavailable_total",
    "Requests with a budget that found the budget hold store (Redis) unreachable, by what their "
    "scopes' budget_enforcement decided: fail_closed (503) or fail_open (admitted)",
    ["enforcement"],
)
AUTH_FAILURES = LeanCounter(
    "ezat_edge_auth_failures_total",
    "Requests refused for their key: missing, invalid (unknown or malformed), revoked, expired, "
    "rotated (a secret past its rotation's overlap) (401), unavailable (503: the database could "
    "not be asked)",
    ["reason"],
)
AUTH_MISSING, AUTH_INVALID, AUTH_REVOKED, AUTH_UNAVAILABLE, AUTH_EXPIRED, AUTH_ROTATED = (
    AUTH_FAILURES.labels(reason)
    for reason in ("missing", "invalid", "revoked", "unavailable", "expired", "rotated")
)

OWNER_LOST_BY = labelled(OWNER_LOST)


class ModelMeters:
    """The latency children of one API and model."""

    __slots__ = ("first_token", "seconds")

    def __init__(self, api: str, model: str) -> None:
        self.seconds = REQUEST_SECONDS.labels(api, model)
        self.first_token = FIRST_TOKEN.labels(api, model)

    def observe(self, seconds: float, first_token: float | None, trace_id: str | None) -> None:
        """A request's whole time and, when it got a first token, its time to it. With a trace
        id (once tracing sets one) each carries it as its exemplar (OpenMetrics only); without,
        nothing more is done."""
        if trace_id is None:
            self.seconds.observe(seconds)
            if first_token is not None:
                self.first_token.observe(first_token)
            return
        exemplar = {"trace_id": trace_id}
        self.seconds.observe(seconds, exemplar)
        if first_token is not None:
            self.first_token.observe(first_token, exemplar)


class ApiMeters:
    """The children of one API (``api`` label), bound once; its models' children are bound at
    their first request (at most one per catalogue model and "other")."""

    __slots__ = (
        "_models",
        "api",
        "disconnects",
        "final_hold",
        "request_bytes",
        "response_bytes",
        "statuses",
    )

    def __init__(self, api: str) -> None:
        self.api = api
        self.statuses = tuple(REQUESTS.labels(api, c) for c in STATUS_CLASSES)
        self.request_bytes = REQUEST_BYTES.labels(api)
        self.response_bytes = RESPONSE_BYTES.labels(api)
        self.final_hold = FINAL_HOLD.labels(api)
        self.disconnects = DISCONNECTS.labels(api)
        self._models: dict[str, ModelMeters] = {}

    def answered(self, status: int, body_bytes: int) -> None:
        self.statuses[min(max(status // 100 - 2, 0), 3)].inc()
        self.response_bytes.observe(body_bytes)

    def model(self, model: str) -> ModelMeters:
        """``model``: a catalogue id or "other" (core/model_label.py), never a client's name."""
        found = self._models.get(model)
        if found is None:
            found = self._models[model] = ModelMeters(self.api, model)
        return found


METERS = {
    "anthropic": ApiMeters("anthropic"),
    "openai": ApiMeters("openai"),
    "responses": ApiMeters("responses"),
}


def prepare(models: Iterable[str]) -> None:
    """Bind every model's latency series at start, at zero: a series born at its first request
    shows no rate until its second one (Prometheus cannot tell it grew), and a dashboard shows
    a quiet model as "no data" instead of 0."""
    names = (*models, OTHER)
    for meters in METERS.values():
        for model in names:
            meters.model(model)


# Key lifecycle (docs/tenancy.md, "Expiry alerts"): set by key_expiry.py, never by a request.
KEY_EXPIRY = Gauge(
    "ezat_edge_key_expiry_seconds",
    "Seconds until the soonest expiry among each team's active keys (negative: expired within "
    'the last day); team: its name, "none" for keys without a team, "other" for the teams '
    "beyond [edge] key_expiry_teams",
    ["team"],
)
