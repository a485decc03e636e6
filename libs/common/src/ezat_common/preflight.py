"""What a configuration needs of the machine it starts on, checked before anything starts
(README.md, "Operating it": `ezat check`; issue 27, "Fail loudly on misconfiguration").

Pure over a ``Config`` and an environment, plus a bind attempt for ports: ``ezat check`` prints
every problem; the router refuses to start on ``missing_keys`` and every service on a port in
use (``PortInUse``, one line: ``runtime.run_service``). A key's value is never read out into a
message, only whether its variable is set.
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Mapping

from . import environment
from .config import Config, ConfigError, split_listen


class PortInUse(ConfigError):
    """A listen address another process holds: names the config key and the address."""


def missing_keys(cfg: Config, environ: Mapping[str, str] | None = None) -> list[str]:
    """A line per deployment whose ``api_key_env`` names an unset or empty variable.

    A deployment with neither ``api_key`` nor ``api_key_env`` is keyless on purpose (a local
    Anthropic-compatible upstream, the bundled simulators); one that names a variable needs it."""
    problems = []
    for d in cfg.deployments:
        if d.api_key_env is not None and not environment.value(d.api_key_env, environ):
            problems.append(
                f"deployment `{d.name}`: api_key_env: the variable {d.api_key_env} is unset or "
                f"empty; set it to the provider's API key"
            )
    return problems


def listens(cfg: Config, environ: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """(config key, HOST:PORT) of every port the stack of ``cfg`` listens on."""
    router_metrics = environment.value(environment.ROUTER_METRICS_LISTEN, environ)
    found = [
        ("edge.listen", cfg.edge.listen),
        ("edge.metrics_listen", cfg.edge.metrics_listen),
        ("router.metrics_listen", router_metrics or cfg.router.metrics_listen),
        ("translator.metrics_listen", cfg.translator.metrics_listen),
        ("billing.metrics_listen", cfg.billing.metrics_listen),
        ("fetcher.metrics_listen", cfg.fetcher.metrics_listen),
    ]
    found += [(f"simulators[{i}].listen", s.listen) for i, s in enumerate(cfg.simulators)]
    return [(key, listen) for key, listen in found if listen]


def port_in_use(key: str, listen: str) -> str | None:
    """A line naming ``key`` when ``listen`` cannot be bound now because it is taken; None when
    it is free (or port 0: any free port)."""
    try:
        host, port = split_listen(listen)
    except ValueError as exc:
        return f"{key}: {exc}"
    if port == 0:
        return None
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as s:
            # As the services bind: SO_REUSEADDR, so a port in TIME_WAIT counts as free.
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((host, port))
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            return in_use_message(key, listen)
        return f"{key}: cannot listen on {listen}: {exc.strerror}"
    return None


def in_use_message(key: str, listen: str) -> str:
    return f"{key}: {listen} is already in use by another process; stop it or choose another port"


def ports_in_use(pairs: list[tuple[str, str]]) -> list[str]:
    """``port_in_use`` of each pair, and a line for an address two keys share."""
    problems: list[str] = []
    seen: dict[str, str] = {}
    for key, listen in pairs:
        try:
            _, port = split_listen(listen)
        except ValueError:
            port = -1
        if port and listen in seen:
            problems.append(f"{key}: {listen} is also {seen[listen]}; give each its own port")
            continue
        seen[listen] = key
        found = port_in_use(key, listen)
        if found:
            problems.append(found)
    return problems
