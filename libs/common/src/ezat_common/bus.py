"""NATS adapter shared by the services and the CLI: connection, claim checks, reply inboxes,
health probes.

Core NATS carries requests and stream events (latency matters, and a lost in-flight stream is
answered by the edge's timeout, not by redelivery). JetStream's Object Store holds payloads above
``max_payload`` (claim checks); see docs/architecture.md. Every connection is made here, from
``nats_env`` (``NATS_URL``: one server or a cluster's list; ``EZAT_JETSTREAM_REPLICAS``), so a
client of a cluster reconnects to another node when its node dies (docs/reliability.md).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

import nats
import nats.errors
from nats.aio.client import Client as Client  # re-exported: services annotate with bus.Client
from nats.aio.msg import Msg

from . import envelopes, lifecycle, metrics, nats_env

# Claim checks and reply inboxes live in their own modules; re-exported here, where the services
# and tests reach them (``bus.Claims``, ``bus.Inbox``, ``bus.CLAIM_UNAVAILABLE``, ...).
from .claims import CHUNK_SIZE as CHUNK_SIZE
from .claims import CLAIM_TTL_SECONDS as CLAIM_TTL_SECONDS
from .claims import CLAIM_UNAVAILABLE as CLAIM_UNAVAILABLE
from .claims import INLINE_LIMIT_MARGIN as INLINE_LIMIT_MARGIN
from .claims import LEGACY_LOOKUP_TIMEOUT as LEGACY_LOOKUP_TIMEOUT
from .claims import TAKE_TIMEOUT as TAKE_TIMEOUT
from .claims import Claims as Claims
from .claims import put_only as put_only
from .inbox import ACK as ACK
from .inbox import Inbox as Inbox
from .inbox import ack_subject_of as ack_subject_of
from .subjects import Subjects
from .subjects import from_env as subjects_from_env

log = logging.getLogger("ezat.bus")


# A CLI command gives up on NATS after this long (it says so and goes on without it).
CLI_CONNECT_TIMEOUT = 3.0


async def _on_error(exc: Exception) -> None:
    log.warning("nats error: %s", exc)


_Callback = Callable[[], Awaitable[None]]


def _callbacks(
    nc: Client, on_reconnected: Callable[[], object] | None = None
) -> tuple[_Callback, _Callback, _Callback]:
    """nats-py's disconnected, reconnected and closed callbacks for ``nc``: they count into
    ezat_common.metrics and say so in the log; ``on_reconnected`` runs after each reconnect."""

    async def disconnected() -> None:
        if nc.is_closed:  # our own close (shutdown): not a lost connection
            return
        metrics.NATS_DISCONNECTS.inc()
        log.warning("nats disconnected; reconnecting")

    async def reconnected() -> None:
        metrics.NATS_RECONNECTS.inc()
        url = nc.connected_url  # its netloc may hold credentials: host and port only
        where = f"{url.hostname}:{url.port}" if url else "?"
        log.info("nats reconnected to %s", where)
        if on_reconnected is not None:
            on_reconnected()

    async def closed() -> None:
        log.info("nats connection closed")

    return disconnected, reconnected, closed


async def _on_service_error(exc: Exception) -> None:
    # nats-py drops the message and reports it here, once per message it dropped.
    if isinstance(exc, nats.errors.SlowConsumerError):
        metrics.NATS_SLOW_CONSUMER_ERRORS.inc()
    await _on_error(exc)


async def connect(
    name: str, service: str | None = None, on_reconnected: Callable[[], object] | None = None
) -> Client:
    """A service's connection: reconnects forever (every 0.5 s, to any server of the list or
    discovered from the cluster) and buffers what is published meanwhile. Its state, losses,
    reconnects and dropped messages are exported (docs/observability.md).

    nats-py's own inboxes (request replies, JetStream API answers, object-store reads) are under
    the ``service``'s (default: ``name``) inbox prefix ``_INBOX.<prefix>.<service>``, the only
    inboxes its NATS user may subscribe to: no service reads another's replies.

    ``on_reconnected``: for what a broadcast missed while disconnected may have left wrong
    (core NATS delivers nothing sent meanwhile): the edge's auth cache."""
    settings = nats_env.from_env()
    nc = Client()
    disconnected, reconnected, closed = _callbacks(nc, on_reconnected)
    await nc.connect(
        **settings.connect_options(),
        name=name,
        inbox_prefix=subjects_from_env().inbox(service or name),
        max_reconnect_attempts=-1,
        reconnect_time_wait=0.5,  # type: ignore[arg-type]  # annotated int; a float is slept
        error_cb=_on_service_error,
        pending_size=64 * 1024 * 1024,
        disconnected_cb=disconnected,
        reconnected_cb=reconnected,
        closed_cb=closed,
    )
    # Read at scrape time (from the metrics server's thread): the client's own state, never stale.
    metrics.NATS_CONNECTED.set_function(lambda: 1.0 if nc.is_connected else 0.0)
    # A replacement started early by a rolling restart subscribes once its predecessor stopped.
    await lifecycle.wait_turn()
    return nc


async def connect_once(name: str, timeout: float = CLI_CONNECT_TIMEOUT) -> Client:
    """A short-lived connection (a CLI command): each server is tried, none for long; raises
    when none answers within ``timeout`` s."""
    settings = nats_env.from_env()
    async with asyncio.timeout(timeout):
        return await nats.connect(
            **settings.connect_options(),
            name=name,
            connect_timeout=min(2.0, timeout),
            max_reconnect_attempts=1,
            reconnect_time_wait=0.1,
            error_cb=_on_error,
        )


def is_no_responders(msg: Msg) -> bool:
    return bool(msg.headers) and msg.headers.get("Status") == "503"  # type: ignore[union-attr]


async def serve_health(
    nc: Client,
    subjects: Subjects,
    service: str,
    check: Callable[[], Awaitable[str | None]],
    states: Callable[[], dict[str, str]] | None = None,
) -> None:
    """Answer health probes: ``check`` returns None when ready, else what is missing (the
    service's ``Readiness.problem``); ``states`` adds what the replica sees of others (the
    router's deployments). Every replica answers: the edge's /api/status counts them.

    Every service calls this last in its start, once subscribed: it also tells a supervisor that
    the process takes work (``lifecycle.announce_ready``, for ``ezat up``'s rolling restart).
    """

    async def on_probe(msg: Msg) -> None:
        problem = await check()
        reply = envelopes.HealthReply(
            service=service,
            ok=problem is None,
            detail=problem or "",
            states=states() if states is not None else {},
        )
        await msg.respond(envelopes.encode(reply))

    await nc.subscribe(subjects.health(service), cb=on_probe)
    lifecycle.announce_ready()
