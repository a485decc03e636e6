"""Which config changes a running service applies in place (SIGHUP, `ezat reload`) and which
need a restart (docs/operations.md, "Changing the config"). Pure: every service and the CLI ask
the same question of the same two configs, so they all apply a file or all refuse it.

Reloaded in place: ``[[models]]`` (names, limits, prices), ``[[deployments]]`` (added, removed,
changed, their prices) and the router's per-request limits in ``ROUTER_KEYS``. Everything else
(listen addresses, the other sections, the simulators) is read once at a start.
"""

from __future__ import annotations

import msgspec

from .config import Config, DeploymentConfig

# Whole sections that reload in place.
SECTIONS = ("models", "deployments")
# Router keys read per request (routing.py, attempt.py, forwarder.py, upstream.py).
ROUTER_KEYS = frozenset(
    {
        "first_byte_timeout",
        "stream_first_byte_timeout",
        "between_events_timeout",
        "max_attempts",
        "cooldown_default_seconds",
    }
)
# Deployment kinds signed by credentials started once (SigV4, Google tokens): a new or changed
# one of these needs a restart of the router.
SIGNED_KINDS = ("bedrock", "vertex")


def needs_restart(running: Config, new: Config) -> list[str]:
    """What ``new`` changes that only a restart applies, a line each (none: it reloads)."""
    problems: list[str] = []
    for section in Config.__struct_fields__:
        if section in SECTIONS:
            continue
        old, now = getattr(running, section), getattr(new, section)
        if old == now:
            continue
        if not isinstance(old, msgspec.Struct):
            problems.append(f"{section}: changes only with a restart")
            continue
        allowed = ROUTER_KEYS if section == "router" else frozenset()
        for key in type(old).__struct_fields__:
            if key not in allowed and getattr(old, key) != getattr(now, key):
                problems.append(f"{section}.{key}: changes only with a restart")
    problems += _signed(running.deployments, new.deployments)
    return problems


def _signed(old: list[DeploymentConfig], new: list[DeploymentConfig]) -> list[str]:
    before = {d.name: d for d in old}
    return [
        f"deployment {d.name}: a new or changed `{d.kind}` deployment needs a restart of the router"
        for d in new
        if d.kind in SIGNED_KINDS and before.get(d.name) != d
    ]


def changed_sections(running: Config, new: Config) -> list[str]:
    """The sections ``new`` changes, for the log line of an applied reload."""
    return [s for s in Config.__struct_fields__ if getattr(running, s) != getattr(new, s)]
