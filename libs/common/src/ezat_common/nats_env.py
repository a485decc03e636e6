"""Where NATS is and how JetStream keeps its data, from the environment (one place for every
service and the CLI; docs/reliability.md, "A 3-node NATS cluster").

``NATS_URL`` is one server or a comma-separated list of them (the nodes of a cluster): the client
connects to one of them, in random order, and reconnects to another when its node dies; the
nodes a server announces in its INFO (``connect_urls``) are added to the list by nats-py.
Credentials written in a URL are passed as connect options too, so that they also apply to the
servers nats-py discovers (their addresses come without them).

``EZAT_JETSTREAM_REPLICAS`` is the replica count of the streams the gateway creates (the usage
outbox and the claim-check object store): 1 by default (a single server), 3 on a 3-node cluster.
A stream that exists with another count is updated to it in the background
(``reconcile_replicas``); if the server refuses (a NATS user without the right), it keeps working
with its old count and the operator is told what to run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

import nats.errors
import nats.js.errors
from nats.js.client import JetStreamContext

from . import environment
from .config import ConfigError

log = logging.getLogger("ezat.nats")

MAX_REPLICAS = 5  # JetStream's own limit
SCHEMES = ("nats", "tls")
RECONCILE_TIMEOUT = 5.0


@dataclass(frozen=True)
class NatsSettings:
    servers: list[str]
    replicas: int = 1
    user: str | None = None
    password: str | None = None
    token: str | None = None

    def connect_options(self) -> dict[str, Any]:
        """Keyword arguments for ``nats.connect``: the servers and the credentials they carry."""
        options: dict[str, Any] = {"servers": self.servers}
        if self.user is not None and self.password is not None:
            options.update(user=self.user, password=self.password)
        elif self.token is not None:
            options["token"] = self.token
        return options


def parse_servers(value: str) -> tuple[list[str], str | None, str | None]:
    """(servers, user, password) of a ``NATS_URL``; a URL without a password carries a token in
    the user part. ``ConfigError`` names the variable and the entry at fault."""
    servers = [part.strip() for part in value.split(",")]
    if not any(servers):
        raise ConfigError(
            f"{environment.NATS_URL}: names no server (expected nats://HOST:PORT[,…])"
        )
    credentials: set[tuple[str | None, str | None]] = set()
    for i, server in enumerate(servers):
        where = f"{environment.NATS_URL}[{i}]"
        if not server:
            raise ConfigError(f"{where}: empty entry in `{value}`")
        parts = urlsplit(server if "://" in server else f"nats://{server}")
        if parts.scheme not in SCHEMES:
            raise ConfigError(f"{where}: `{parts.scheme}://` is not one of nats://, tls://")
        try:
            parts.port  # noqa: B018  # raises ValueError for a port out of range or not a number
        except ValueError:
            raise ConfigError(f"{where}: `{server}` has an invalid port") from None
        if not parts.hostname or parts.path not in ("", "/"):
            raise ConfigError(f"{where}: `{server}` is not a server address (HOST:PORT)")
        if parts.username is not None:
            secret = unquote(parts.password) if parts.password else None
            credentials.add((unquote(parts.username), secret))
    if len(credentials) > 1:
        raise ConfigError(f"{environment.NATS_URL}: the servers carry different credentials")
    user, password = credentials.pop() if credentials else (None, None)
    return servers, user, password


def parse_replicas(value: str | None) -> int:
    if value is None or not value.strip():
        return 1
    try:
        replicas = int(value)
    except ValueError:
        raise ConfigError(
            f"{environment.JETSTREAM_REPLICAS}: `{value}` is not a whole number"
        ) from None
    if not 1 <= replicas <= MAX_REPLICAS:
        raise ConfigError(
            f"{environment.JETSTREAM_REPLICAS}: must be between 1 and {MAX_REPLICAS}, "
            f"not {replicas}"
        )
    return replicas


def from_env(environ: Mapping[str, str] | None = None) -> NatsSettings:
    servers, user, password = parse_servers(environment.nats_url(environ))
    replicas = parse_replicas(environment.jetstream_replicas(environ))
    if user is not None and password is None:
        return NatsSettings(servers, replicas, token=user)
    return NatsSettings(servers, replicas, user=user, password=password)


def replicas() -> int:
    """The configured replica count (``EZAT_JETSTREAM_REPLICAS``); ``ConfigError`` if bad."""
    return parse_replicas(environment.jetstream_replicas())


async def reconcile_replicas(js: JetStreamContext, stream: str, wanted: int) -> bool:
    """Bring an existing stream to ``wanted`` replicas (JetStream moves the data itself); True
    when it has them. A refusal (permissions, too few servers) is logged with the fix."""
    try:
        async with asyncio.timeout(RECONCILE_TIMEOUT):
            info = await js.stream_info(stream)
            config = info.config
            if config.num_replicas == wanted:
                return True
            log.warning(
                "stream %s has %s replicas, %s wants %d: updating it",
                stream,
                config.num_replicas,
                environment.JETSTREAM_REPLICAS,
                wanted,
            )
            config.num_replicas = wanted
            await js.update_stream(config)
    except (nats.errors.Error, nats.js.errors.Error, TimeoutError, OSError) as exc:
        log.warning(
            "stream %s keeps its replica count (%r); an operator runs "
            "`nats stream edit %s --replicas %d`",
            stream,
            exc,
            stream,
            wanted,
        )
        return False
    log.info("stream %s now has %d replicas", stream, wanted)
    return True
