"""Operator configuration: one TOML file (README.md, "Configuration"), decoded once into typed
structs.

A bad file fails at start with a ``ConfigError`` naming the file and the key, e.g.
``config/ezat.toml: models[0].context_window: Expected `int`, got `str```.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import msgspec
from msgspec import Struct, field

from . import environment
from .config_checks import COUNT_TOKENS as COUNT_TOKENS
from .config_checks import KINDS as KINDS
from .config_checks import MAX_BUDGET_THRESHOLDS as MAX_BUDGET_THRESHOLDS
from .config_checks import MIN_STREAM_BUFFER as MIN_STREAM_BUFFER
from .config_checks import check, located
from .config_checks import split_listen as split_listen
from .config_error import ConfigError as ConfigError

DEFAULT_MAX_BODY = 32 * 1024 * 1024
# About 25 ms of decoding and translating a body of many small items on the loop, at most.
DEFAULT_OFF_LOOP_BODY = 256 * 1024
# Bytes the edge holds for one stream's client beyond what it has read (docs/reliability.md).
DEFAULT_STREAM_BUFFER = 1024 * 1024
# Seconds a client has to take a non-streamed answer (docs/reliability.md).
DEFAULT_UNREAD_ANSWER_GRACE = 10.0


class EdgeConfig(Struct, forbid_unknown_fields=True, kw_only=True):
    listen: str = "127.0.0.1:8080"
    max_body_bytes: int = DEFAULT_MAX_BODY
    # Seconds a request may wait for its first reply from the translator/router before a 504.
    # Unset: derived at start-up from [router] (max_attempts x (connect_timeout +
    # first_byte_timeout) + 15 s), so the router always answers first (first_byte_timeout is
    # the longest wait for a first reply: a non-streamed answer; docs/reliability.md).
    first_reply_timeout: float | None = None
    # Seconds between ": ping" / "event: ping" keep-alives on a quiet stream.
    ping_interval: float = 10.0
    # Seconds an auth result stays cached (revocation is also broadcast, so this is a fallback).
    # While PostgreSQL is unreachable a known key is served from the cache past this TTL.
    auth_cache_ttl: float = 5.0
    # PostgreSQL connections per edge used only for key lookups: a pool of their own, so that
    # no tenant's stored-response reads (on the edge's other pool) can starve another tenant's
    # authentication (docs/api.md, "Limits").
    auth_db_connections: int = 2
    # Slow and hostile clients (docs/reliability.md). Seconds a connection may take to send a
    # complete request head (request line and headers), counted from the connection's opening
    # or, on a kept-alive connection, from the first byte of the next request.
    header_timeout: float = 10.0
    # A request body must arrive within body_timeout seconds plus one second per body_min_rate
    # bytes of its size (a 32 MB body: 30 + 256 s at the defaults).
    body_timeout: float = 30.0
    body_min_rate: int = 128 * 1024
    # Seconds an idle kept-alive connection stays open between requests.
    keepalive_timeout: float = 15.0
    # Open client connections per edge; beyond it a new connection is answered 503 and closed.
    # Lowered at start to the process's file limit less a reserve (NATS, PostgreSQL, Redis).
    max_connections: int = 4096
    # Model requests (messages, count_tokens, chat) in flight per edge; beyond it the edge
    # answers 529 overloaded_error (OpenAI API: 503) with retry-after at once.
    max_in_flight: int = 2048
    # A second port serving only /metrics, /readyz and /healthz (bounded: ezat_common.metrics_port),
    # so that a scraper's network policy never admits it to the API port (deploy/k8s/README.md,
    # "Network policies"). Unset: metrics only on `listen` (local use).
    metrics_listen: str | None = None
    # Bytes of one stream the edge may hold while its client does not read them (its write
    # buffer); beyond it the stream ends with an error event and its request is stopped.
    stream_buffer_bytes: int = DEFAULT_STREAM_BUFFER
    # Request-body bytes one edge holds at once, in all and for one key: a body counts its
    # declared content-length (chunked: its chunks as they arrive) from its first byte until its
    # request ends. A body past either gets 529 overloaded_error (OpenAI API: 503), retry-after.
    body_bytes_in_flight: int = 256 * 1024 * 1024
    body_bytes_in_flight_per_key: int = 64 * 1024 * 1024
    # Seconds a client has to take a non-streamed answer once the edge writes it, plus one per
    # body_min_rate bytes of it; an answer still waiting at the edge then is dropped and its
    # connection closed (its request stays billed).
    unread_answer_grace: float = DEFAULT_UNREAD_ANSWER_GRACE
    # The key-expiry gauge (docs/tenancy.md, "Expiry alerts"): seconds between its refreshes,
    # and the most teams it names (those whose keys expire soonest; the rest: team="other").
    key_expiry_interval: float = 60.0
    key_expiry_teams: int = 50
    # Budget holds (docs/billing.md, "Budget holds"): what a request of a key with a budget (its
    # own or its team's) gets when the hold store (Redis) cannot be reached: "fail_closed" a 503
    # (the budget is never overshot), "fail_open" admission on the month's spend alone (as
    # without holds: concurrent requests can overshoot). And the longest a hold lasts (a request
    # still running then no longer holds its worst case; its row counts when it is stored).
    budget_enforcement: Literal["fail_closed", "fail_open"] = "fail_closed"
    budget_hold_seconds: float = 3600.0
    # The request log's table (docs/observability.md, "Request log"): entries older than this
    # many days, and beyond the newest request_log_rows, are deleted (every minute, by each edge).
    request_log_days: float = 7.0
    request_log_rows: int = 1_000_000


class Price(Struct, forbid_unknown_fields=True, kw_only=True):
    """USD per million tokens, as operators write them; cache prices default from input.

    Server tools the upstream runs are priced in USD per 1,000 requests (docs/billing.md,
    "Server tools"). None on a model: Anthropic's published price (web search $10 per 1,000,
    web fetch nothing beyond its tokens); None on a deployment's price: the model's.
    """

    input: float
    output: float
    cache_write_5m: float | None = None
    cache_write_1h: float | None = None
    cache_read: float | None = None
    web_search_per_1k: float | None = None
    web_fetch_per_1k: float | None = None


class ModelConfig(Struct, forbid_unknown_fields=True, kw_only=True):
    id: str
    aliases: list[str] = field(default_factory=list)
    context_window: int
    max_output_tokens: int
    sampling: bool = False
    prompt_caching: bool = True
    thinking: Literal["adaptive", "budget", "none"] = "none"
    effort_levels: list[Literal["low", "medium", "high", "xhigh", "max"]] = field(
        default_factory=list
    )
    min_cache_tokens: int = 1024
    vision: bool = True
    pdf: bool = True
    structured_output: bool = True
    owned_by: str = "anthropic"
    created: int = 0
    price: Price


Kind = Literal["anthropic", "bedrock", "vertex"]


class DeploymentConfig(Struct, forbid_unknown_fields=True, kw_only=True):
    name: str
    model: str
    # "anthropic" (default), "bedrock" or "vertex"; checked (and listed) by parse_config.
    kind: str = "anthropic"
    # Required for anthropic. For bedrock/vertex optional: the provider's URL by default, else
    # only its scheme, host and port are used (a VPC endpoint, the simulator); no path.
    base_url: str = ""
    upstream_model: str | None = None  # anthropic: the name the deployment knows the model by
    # bedrock: a Bedrock API key (sent as a bearer token) instead of SigV4; vertex: not used.
    api_key_env: str | None = None
    api_key: str | None = None
    # anthropic: the routing region. bedrock/vertex: the provider's (AWS / Google Cloud) region,
    # and the routing region too unless ``routing_region`` names the gateway's own (AWS and
    # Google name their regions differently, so one pool of both kinds needs it).
    region: str = "local"
    routing_region: str = ""  # "": ``region`` (set at decoding); routing and billing read it
    weight: int = 1
    model_id: str | None = None  # bedrock/vertex: the provider's model id (or profile, ARN)
    bedrock_api: Literal["invoke", "messages"] | None = None  # bedrock: None = "invoke"
    project: str | None = None  # vertex: the Google Cloud project
    # bedrock (SigV4): a named profile of the shared AWS config/credentials files (None: the
    # standard chain, AWS_PROFILE included). vertex: a service-account key file (None:
    # Application Default Credentials). Deployments naming the same one share its refresh.
    aws_profile: str | None = None
    google_key_file: str | None = None
    anthropic_version: str | None = None  # None: the kind's documented default
    # Overrides of the kind's allow-list of anthropic-beta values (None: the kind's list) and
    # of the top-level body fields it refuses (None: the kind's list).
    betas: list[str] | None = None
    drop_fields: list[str] | None = None
    price: Price | None = None  # None: the model's price
    # Who answers count_tokens: "upstream" (the deployment's count route) or "estimate" (the
    # translator's estimate; the deployment is never asked). Checked by parse_config.
    count_tokens: str = "upstream"

    def __post_init__(self) -> None:
        if not self.routing_region:
            self.routing_region = self.region

    def key(self) -> str | None:
        if self.api_key is not None:
            return self.api_key
        if self.api_key_env is not None:
            return environment.value(self.api_key_env)
        return None


class RouterConfig(Struct, forbid_unknown_fields=True, kw_only=True):
    region: str = "local"
    # Upstream timeouts, in seconds (docs/routing.md "Timeouts" has the reasons): the TCP/TLS
    # connect; a non-streamed request's response headers (they come with the whole answer, so
    # this is the Anthropic SDKs' own 10-minute bound); a stream's headers and message_start, and
    # count_tokens' answer (both come in seconds); the silence allowed between two reads of a
    # started stream (a deployment pings a quiet stream at least every ~30 s).
    connect_timeout: float = 5.0
    first_byte_timeout: float = 600.0
    stream_first_byte_timeout: float = 30.0
    between_events_timeout: float = 60.0
    max_attempts: int = 3
    metrics_listen: str | None = None
    # Session affinity binding lifetime (refreshed on use); 1-hour cache breakpoints get longer.
    session_ttl_seconds: float = 300.0
    session_ttl_1h_seconds: float = 3600.0
    # A 429 without retry-after rests the deployment this long; no cooldown lasts longer than max.
    cooldown_default_seconds: float = 5.0
    cooldown_max_seconds: float = 300.0
    # Circuit breaker: open after this many consecutive faults, probe again after open_seconds.
    breaker_failures: int = 5
    breaker_open_seconds: float = 10.0
    # Extra attempts (failover, last resort) allowed: this share of requests, plus a floor per s.
    retry_budget_ratio: float = 0.2
    retry_budget_min_per_second: float = 5.0
    # Shared state (Redis): health refreshed this often; every Redis call bounded by the timeout.
    health_sync_seconds: float = 0.5
    redis_timeout: float = 0.1
    # Prefix affinity yields to least-outstanding when its home has this many more requests
    # in flight than the least loaded healthy deployment.
    prefix_spill_outstanding: int = 16
    # Refused anthropic-beta values (Bedrock/Vertex: any string a client sends) a deployment
    # remembers, only to log each once, and the fewest seconds between two such log lines; every
    # refused value is counted in ezat_router_dropped_total (docs/reliability.md).
    dropped_log_capacity: int = 256
    dropped_log_interval: float = 60.0


class TranslatorConfig(Struct, forbid_unknown_fields=True, kw_only=True):
    metrics_listen: str | None = None
    # Stored Responses (docs/responses.md, "Stored responses"): the most one response keeps of
    # its own turn, the most one API key keeps in all, and the longest conversation a
    # previous_response_id may continue (responses, and bytes of their turns).
    stored_response_max_bytes: int = 16 * 1024 * 1024
    stored_bytes_per_key: int = 1024 * 1024 * 1024
    stored_chain_max_turns: int = 1000
    stored_chain_max_bytes: int = 32 * 1024 * 1024
    # A request body above this many bytes is decoded (in pieces) and translated in a worker
    # thread, so that the event loop, and the heartbeats it sends, never wait for it; smaller
    # ones take no thread hop (docs/reliability.md, "Large bodies").
    off_loop_body_bytes: int = DEFAULT_OFF_LOOP_BODY


class BillingConfig(Struct, forbid_unknown_fields=True, kw_only=True):
    metrics_listen: str | None = None
    # Seconds a complete record waits for the edge's confirmation that its final event was
    # written; past them it is re-marked failed and not charged (docs/billing.md).
    delivery_confirm_seconds: float = 60.0
    # Budget soft thresholds (docs/billing.md, "Soft thresholds"): every budget_check_seconds
    # billing counts the keys and teams whose month's spend reached each share of their budget
    # (ezat_billing_budget_scopes; the alert rules read 0.8 and 1.0).
    budget_check_seconds: float = 30.0
    budget_thresholds: list[float] = field(default_factory=lambda: [0.8, 1.0])


class FetcherConfig(Struct, forbid_unknown_fields=True, kw_only=True):
    allow_networks: list[str] = field(default_factory=list)
    metrics_listen: str | None = None
    # Fair shares of one replica's download slots (docs/reliability.md): downloads at once in
    # all, at once for one key (well below the total, so a key cannot take every slot), at once
    # for one request, and waiting for one key (more are refused with a 503 and retry-after).
    max_concurrent: int = 32
    max_per_key: int = 8
    max_per_request: int = 4
    max_queued_per_key: int = 200


class ShutdownConfig(Struct, forbid_unknown_fields=True, kw_only=True):
    """How a service stops on SIGTERM (every service reads it; docs/reliability.md)."""

    # Seconds in-flight work (open streams, OpenAI relays, downloads, usage writes) may take to
    # finish after the service stopped taking new work; what is left then ends with an error.
    drain_timeout: float = 30.0


class SimulatorConfig(Struct, forbid_unknown_fields=True, kw_only=True):
    """A bundled simulator deployment that ``ezat up`` starts (README.md, "Configuration")."""

    name: str
    listen: str
    # Delay before the first event and between streamed tokens, in milliseconds.
    first_token_ms: float = 0.0
    token_ms: float = 0.0
    # Its Bedrock face's AWS access key id (the secret: EZAT_SIM_BEDROCK_SECRET_ACCESS_KEY in
    # its environment, never here), and its Vertex face: the service-account key file whose
    # public key it trusts at /token, and the lifetime of the tokens it issues
    # (simulator/README.md).
    bedrock_access_key_id: str | None = None
    vertex_service_account: str | None = None
    vertex_token_lifetime: float = 3600.0


class Config(Struct, forbid_unknown_fields=True, kw_only=True):
    edge: EdgeConfig = field(default_factory=EdgeConfig)
    models: list[ModelConfig] = field(default_factory=list)
    deployments: list[DeploymentConfig] = field(default_factory=list)
    router: RouterConfig = field(default_factory=RouterConfig)
    translator: TranslatorConfig = field(default_factory=TranslatorConfig)
    billing: BillingConfig = field(default_factory=BillingConfig)
    fetcher: FetcherConfig = field(default_factory=FetcherConfig)
    shutdown: ShutdownConfig = field(default_factory=ShutdownConfig)
    simulators: list[SimulatorConfig] = field(default_factory=list)

    def model(self, model_id: str) -> ModelConfig:
        for m in self.models:
            if m.id == model_id:
                return m
        raise KeyError(model_id)


def local_url(listen: str) -> str:
    """The ``http://`` base URL that reaches a ``listen`` address from this host: a wildcard
    address (every interface) is reached on loopback."""
    host, port = split_listen(listen)
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def parse_config(text: str | bytes, file: str = "<config>") -> Config:
    try:
        cfg = msgspec.toml.decode(text, type=Config)
    except (msgspec.ValidationError, msgspec.DecodeError) as err:
        raise located(file, err) from None
    check(cfg, file)
    return cfg


def config_path(explicit: str | None = None) -> Path:
    path = explicit or environment.config_path()
    if not path:
        raise ConfigError(f"no configuration: pass --config FILE or set {environment.CONFIG}")
    return Path(path)


def load_config(explicit: str | None = None) -> Config:
    path = config_path(explicit)
    try:
        text = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the configuration: {exc.strerror}") from None
    return parse_config(text, str(path))
