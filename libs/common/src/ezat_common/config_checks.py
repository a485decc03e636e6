"""The rules a decoded configuration must meet beyond its types (``check``), and a decode error
located at its key (``located``): each failure a ``ConfigError`` naming the file and the key,
e.g. ``config/ezat.toml: deployments[0].region: a `bedrock` deployment needs it``.
``config.parse_config`` calls both; the keys and their defaults are in config.py, which
re-exports the public names here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import msgspec

from .config_error import ConfigError
from .located import split_location
from .names import NAME_LENGTH, normalise, valid_model_name

if TYPE_CHECKING:
    from .config import BillingConfig, Config, DeploymentConfig, Price

# The smallest allowed: a transport pauses writing at 64 KiB, and the cap is checked from there.
MIN_STREAM_BUFFER = 64 * 1024
# Budget soft thresholds: each one is a series per scope kind, a bounded label.
MAX_BUDGET_THRESHOLDS = 10

# Deployment kinds (docs/routing.md, "Deployment kinds"): the API a deployment speaks.
KINDS = ("anthropic", "bedrock", "vertex")
# A deployment's ``count_tokens``: its own count route, or the translator's estimate.
COUNT_TOKENS = ("upstream", "estimate")
# Keys only one kind reads; set on another kind they are a ConfigError, not silently ignored.
_KIND_KEYS: dict[str, tuple[str, ...]] = {
    "anthropic": ("upstream_model",),
    "bedrock": ("bedrock_api", "aws_profile"),
    "vertex": ("project", "google_key_file"),
}
_NOT_FOR: dict[str, tuple[str, ...]] = {"vertex": ("api_key", "api_key_env")}

# A provider region goes into a host name: lower-case letters, digits and dashes only.
_REGION_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-")

_EDGE_POSITIVE = (
    "header_timeout",
    "body_timeout",
    "body_min_rate",
    "keepalive_timeout",
    "max_connections",
    "max_in_flight",
    "unread_answer_grace",
    "auth_db_connections",
    "key_expiry_interval",
    "key_expiry_teams",
)

_TRANSLATOR_POSITIVE = (
    "stored_response_max_bytes",
    "stored_bytes_per_key",
    "stored_chain_max_turns",
    "stored_chain_max_bytes",
)

# Every key that must be above zero, by section: one loop checks them all.
_POSITIVE = {
    "edge": _EDGE_POSITIVE,
    "router": ("dropped_log_capacity", "dropped_log_interval"),
    "translator": _TRANSLATOR_POSITIVE,
}


def located(file: str, err: msgspec.ValidationError | msgspec.DecodeError) -> ConfigError:
    text = str(err)
    path, problem = split_location(text)
    if path is not None:
        return ConfigError(f"{file}: {path or '(top level)'}: {problem}")
    if isinstance(err, msgspec.ValidationError):
        return ConfigError(f"{file}: (top level): {text}")
    return ConfigError(f"{file}: {text}")


def check(cfg: Config, file: str) -> None:
    for section, keys in _POSITIVE.items():
        for name in keys:
            if getattr(getattr(cfg, section), name) <= 0:
                raise ConfigError(f"{file}: {section}.{name}: must be positive")
    if cfg.edge.stream_buffer_bytes < MIN_STREAM_BUFFER:
        raise ConfigError(f"{file}: edge.stream_buffer_bytes: must be at least {MIN_STREAM_BUFFER}")
    if cfg.translator.off_loop_body_bytes < 0:
        raise ConfigError(f"{file}: translator.off_loop_body_bytes: must be 0 or more (bytes)")
    # Smaller, a body the size limit allows would be refused for ever (retry-after, then again).
    if cfg.edge.body_bytes_in_flight_per_key < cfg.edge.max_body_bytes:
        raise ConfigError(
            f"{file}: edge.body_bytes_in_flight_per_key: must be at least edge.max_body_bytes"
            f" ({cfg.edge.max_body_bytes})"
        )
    if cfg.edge.body_bytes_in_flight < cfg.edge.body_bytes_in_flight_per_key:
        raise ConfigError(
            f"{file}: edge.body_bytes_in_flight: must be at least"
            f" edge.body_bytes_in_flight_per_key ({cfg.edge.body_bytes_in_flight_per_key})"
        )
    names: dict[str, str] = {}
    for i, m in enumerate(cfg.models):
        for j, name in enumerate([m.id, *m.aliases]):
            key = normalise(name)
            where = f"models[{i}].id" if j == 0 else f"models[{i}].aliases[{j - 1}]"
            if not valid_model_name(name):
                raise ConfigError(f"{file}: {where}: a model name needs {NAME_LENGTH}")
            if key in names:
                raise ConfigError(f"{file}: {where}: `{name}` is already used by {names[key]}")
            names[key] = where
        if m.max_output_tokens < 1 or m.context_window < 1:
            raise ConfigError(f"{file}: models[{i}]: token limits must be positive")
        _check_price(m.price, f"{file}: models[{i}].price")
    if not 0 <= cfg.shutdown.drain_timeout <= 3600:
        raise ConfigError(f"{file}: shutdown.drain_timeout: must be between 0 and 3600 seconds")
    model_ids = {m.id for m in cfg.models}
    seen: set[str] = set()
    for i, d in enumerate(cfg.deployments):
        if d.model not in model_ids:
            raise ConfigError(
                f"{file}: deployments[{i}].model: `{d.model}` is not the id of any [[models]] entry"
            )
        if d.name in seen:
            raise ConfigError(f"{file}: deployments[{i}].name: `{d.name}` is used twice")
        seen.add(d.name)
        if d.weight < 1:
            raise ConfigError(f"{file}: deployments[{i}].weight: must be at least 1")
        _check_kind(d, f"{file}: deployments[{i}]")
        if d.count_tokens not in COUNT_TOKENS:
            raise ConfigError(
                f"{file}: deployments[{i}].count_tokens: deployment `{d.name}` has "
                f"`{d.count_tokens}`; one of `upstream`, `estimate`"
            )
    if not cfg.billing.delivery_confirm_seconds >= 1:
        raise ConfigError(
            f"{file}: billing.delivery_confirm_seconds: must be at least 1 (seconds); it must "
            "outlast the edge's confirmation of a delivered final event"
        )
    _check_budget_thresholds(cfg.billing, file)
    for key, listen in [("edge.listen", cfg.edge.listen)] + [
        (f"simulators[{i}].listen", s.listen) for i, s in enumerate(cfg.simulators)
    ]:
        try:
            split_listen(listen)
        except ValueError as exc:
            raise ConfigError(f"{file}: {key}: {exc}") from None


def _check_budget_thresholds(billing: BillingConfig, file: str) -> None:
    if not billing.budget_check_seconds > 0:
        raise ConfigError(f"{file}: billing.budget_check_seconds: must be positive")
    shares = billing.budget_thresholds
    if not 1 <= len(shares) <= MAX_BUDGET_THRESHOLDS or len(set(shares)) != len(shares):
        raise ConfigError(
            f"{file}: billing.budget_thresholds: 1 to {MAX_BUDGET_THRESHOLDS} distinct shares of "
            "a budget, such as [0.8, 1.0]"
        )
    for i, share in enumerate(shares):
        if not 0 < share <= 10:
            raise ConfigError(
                f"{file}: billing.budget_thresholds[{i}]: {share} is not a share of a budget "
                "above 0 and at most 10 (1.0 is the whole budget)"
            )


def _check_price(price: Price, where: str) -> None:
    for pname in (
        "input",
        "output",
        "cache_write_5m",
        "cache_write_1h",
        "cache_read",
        "web_search_per_1k",
        "web_fetch_per_1k",
    ):
        value = getattr(price, pname)
        if value is not None and value < 0:
            raise ConfigError(f"{where}.{pname}: must not be negative")


def _check_kind(d: DeploymentConfig, where: str) -> None:
    """The kind's own keys: present where required, absent where another kind's."""
    if d.kind not in KINDS:
        kinds = ", ".join(f"`{k}`" for k in KINDS)
        raise ConfigError(f"{where}.kind: `{d.kind}` is not a deployment kind; one of {kinds}")
    for kind, keys in _KIND_KEYS.items():
        foreign = [key for key in keys if kind != d.kind and getattr(d, key) is not None]
        if foreign:
            raise ConfigError(f"{where}.{foreign[0]}: only a `{kind}` deployment has it")
    for key in _NOT_FOR.get(d.kind, ()):
        if getattr(d, key) is not None:
            raise ConfigError(f"{where}.{key}: a `{d.kind}` deployment does not use it")
    if d.price is not None:
        _check_price(d.price, f"{where}.price")
    if d.aws_profile is not None and (d.api_key is not None or d.api_key_env is not None):
        raise ConfigError(f"{where}.aws_profile: a deployment with a Bedrock API key signs nothing")
    if d.kind == "anthropic":
        if d.model_id is not None:
            raise ConfigError(f"{where}.model_id: an `anthropic` deployment uses upstream_model")
        if not d.base_url:
            raise ConfigError(f"{where}.base_url: an `anthropic` deployment needs it")
        _check_base_url(d.base_url, f"{where}.base_url")
        return
    needed = ("project", "region", "model_id") if d.kind == "vertex" else ("region", "model_id")
    for key in needed:
        value = getattr(d, key)
        # "local" is the routing default, never a provider's region.
        if not value or (key == "region" and value == "local"):
            raise ConfigError(f"{where}.{key}: a `{d.kind}` deployment needs it")
    if not set(d.region) <= _REGION_CHARS:
        raise ConfigError(f"{where}.region: `{d.region}` is not a provider region name")
    if d.base_url:
        _check_base_url(d.base_url, f"{where}.base_url")
        if urlsplit(d.base_url).path not in ("", "/"):
            raise ConfigError(
                f"{where}.base_url: `{d.base_url}` has a path; a `{d.kind}` deployment takes only "
                "scheme, host and port from it (the provider's path is kept)"
            )


def _check_base_url(url: str, where: str) -> None:
    """A deployment's address must name a host and a valid port; no query or fragment."""
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"{where}: must start with http(s)://")
    parts = urlsplit(url)
    try:
        parts.port  # noqa: B018  # raises ValueError for a port out of range or not a number
    except ValueError:
        raise ConfigError(f"{where}: `{url}` has an invalid port") from None
    if not parts.hostname:
        raise ConfigError(f"{where}: `{url}` names no host")
    if parts.query or parts.fragment:
        raise ConfigError(f"{where}: `{url}` must not have a query or fragment")


def split_listen(listen: str) -> tuple[str, int]:
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"`{listen}` is not HOST:PORT")
    return host.strip("[]") or "0.0.0.0", int(port)
