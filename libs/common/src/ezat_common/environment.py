"""Every environment variable a service reads, read here, with its default and its check.

The TOML file (``EZAT_CONFIG``) says what the gateway does; these variables say where its servers
are and who this process is (README.md, the Environment table). Services and
``ezat_common`` read them only through these accessors, so each name, default and check has one
home; a bad value is a ``ConfigError`` naming the variable, which stops the process at start-up
(``runtime.run_service``: exit 2). The CLI sets most of them for the processes it starts.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping
from typing import TypeVar

from .config_error import ConfigError

CONFIG = "EZAT_CONFIG"
SUBJECT_PREFIX = "EZAT_SUBJECT_PREFIX"
NATS_URL = "NATS_URL"
JETSTREAM_REPLICAS = "EZAT_JETSTREAM_REPLICAS"
DATABASE_URL = "DATABASE_URL"
REDIS_URL = "REDIS_URL"
# The budget hold store and spend counters (docs/billing.md, "Across regions"); REDIS_URL if unset.
BUDGET_REDIS_URL = "EZAT_BUDGET_REDIS_URL"
LOG_LEVEL = "EZAT_LOG_LEVEL"
DRAIN_DIR = "EZAT_DRAIN_DIR"
TAKE_OVER_FROM = "EZAT_TAKE_OVER_FROM"
# The descriptor of a listening socket the supervisor bound for the edge and hands to every edge
# it starts (docs/reliability.md, "The edge's socket").
EDGE_LISTEN_FD = "EZAT_EDGE_LISTEN_FD"
# Where `ezat up` keeps embedded servers' data and infra.json (the CLI only).
DATA_DIR = "EZAT_DATA_DIR"
# The edge's address for the CLI's admin-API commands (teams, keys, audit, apply; the CLI only).
ADMIN_URL = "EZAT_URL"
ROUTER_REGION = "EZAT_ROUTER_REGION"
ROUTER_METRICS_LISTEN = "EZAT_ROUTER_METRICS_LISTEN"
# The bearer token of the edge's operator endpoints (/api/status); unset: they answer 403.
OPERATOR_TOKEN = "EZAT_OPERATOR_TOKEN"
SEAL_KEYS = "EZAT_SEAL_KEYS"
# The metrics port of router, translator, billing and fetcher (ezat_common.metrics_port): open
# connections it keeps, and seconds a connection may take to send a request head (also how long
# an idle kept-alive connection stays open).
METRICS_MAX_CONNECTIONS = "EZAT_METRICS_MAX_CONNECTIONS"
METRICS_TIMEOUT = "EZAT_METRICS_TIMEOUT"
DEFAULT_METRICS_MAX_CONNECTIONS = 16
DEFAULT_METRICS_TIMEOUT = 5.0
# Key ids of EZAT_SEAL_KEYS removed since (comma-separated): reasoning sealed under one of them
# is dropped; under any other unknown id it is refused (docs/responses.md, "Reasoning").
SEAL_KEYS_RETIRED = "EZAT_SEAL_KEYS_RETIRED"

DEFAULT_SUBJECT_PREFIX = "ezat"
DEFAULT_NATS_URL = "nats://127.0.0.1:4222"
DEFAULT_DATABASE_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
DEFAULT_LOG_LEVEL = "INFO"

# One NATS subject token, and also safe as the start of a JetStream stream, an object-store bucket
# (``[A-Za-z0-9_-]``) and a Redis key: the prefix is spelled into all four.
_PREFIX = re.compile(r"[A-Za-z0-9_-]+")


def value(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The variable as set (possibly empty), or None; for names the configuration gives
    (a deployment's ``api_key_env``)."""
    return (os.environ if environ is None else environ).get(name)


def _set(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The variable, or None when it is unset or empty."""
    return value(name, environ) or None


def config_path() -> str | None:
    return _set(CONFIG)


def subject_prefix(environ: Mapping[str, str] | None = None) -> str:
    """The first token of every subject, stream, bucket and Redis key of this stack."""
    prefix = _set(SUBJECT_PREFIX, environ)
    if prefix is None:
        return DEFAULT_SUBJECT_PREFIX
    if not _PREFIX.fullmatch(prefix):
        raise ConfigError(
            f"{SUBJECT_PREFIX}: `{prefix}` cannot start NATS subjects; use one token of letters, "
            f"digits, `_` and `-` (such as `ezat` or `tenant-2`), or unset it for "
            f"`{DEFAULT_SUBJECT_PREFIX}`"
        )
    return prefix


def nats_url(environ: Mapping[str, str] | None = None) -> str:
    """The NATS servers as given (``nats_env.parse_servers`` reads them)."""
    return _set(NATS_URL, environ) or DEFAULT_NATS_URL


def jetstream_replicas(environ: Mapping[str, str] | None = None) -> str | None:
    """As given (``nats_env.parse_replicas`` checks it)."""
    return value(JETSTREAM_REPLICAS, environ)


def database_url() -> str:
    return os.environ.get(DATABASE_URL, DEFAULT_DATABASE_URL)


def redis_url() -> str | None:
    """None (unset or empty): this process runs without Redis, which only degrades."""
    return _set(REDIS_URL)


def budget_redis_url() -> str | None:
    """The Redis of budget holds and spend counters, which every region's edges and billing must
    share for a budget to hold across regions: ``EZAT_BUDGET_REDIS_URL``, else ``REDIS_URL``."""
    return _set(BUDGET_REDIS_URL) or redis_url()


def log_level() -> str:
    return os.environ.get(LOG_LEVEL, DEFAULT_LOG_LEVEL).upper()


def drain_dir() -> str | None:
    return _set(DRAIN_DIR)


def take_over_from() -> str:
    """The pid this replacement waits for, consumed: only the first call sees it."""
    return os.environ.pop(TAKE_OVER_FROM, "")


def edge_listen_fd() -> str | None:
    """The listening socket's descriptor a supervisor handed the edge (README.md, environment)."""
    return _set(EDGE_LISTEN_FD)


def router_region() -> str | None:
    """Overrides ``[router] region``: one configuration file, routers in several regions."""
    return _set(ROUTER_REGION)


def router_metrics_listen() -> str | None:
    """Overrides ``[router] metrics_listen``."""
    return _set(ROUTER_METRICS_LISTEN)


def operator_token() -> str | None:
    """The edge's operator token (docs/api.md, "Operator status"), or None: no operator."""
    return _set(OPERATOR_TOKEN)


_N = TypeVar("_N", int, float)


def positive_seconds(name: str) -> float | None:
    """A positive, finite number of seconds, or None when unset or blank."""
    return _positive(name, float, "a number of seconds")


def positive_int(name: str) -> int | None:
    """A positive whole number, or None when unset or blank."""
    return _positive(name, int, "a whole number")


def _positive(name: str, parse: Callable[[str], _N], what: str) -> _N | None:
    raw = value(name)
    if raw is None or not raw.strip():
        return None
    try:
        number = parse(raw)
    except ValueError:
        raise ConfigError(f"{name}: `{raw}` is not {what}") from None
    if not math.isfinite(number) or number <= 0:
        raise ConfigError(f"{name}: must be a positive {what.removeprefix('a ')}")
    return number


def metrics_max_connections() -> int:
    """Open connections a metrics port keeps; beyond them a new one is closed at once."""
    return positive_int(METRICS_MAX_CONNECTIONS) or DEFAULT_METRICS_MAX_CONNECTIONS


def metrics_timeout() -> float:
    """Seconds a metrics port's connection may take to send its request head, or stay idle."""
    return positive_seconds(METRICS_TIMEOUT) or DEFAULT_METRICS_TIMEOUT
