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
import base64
import hashlib
import io
import itertools
import json
import logging
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import nats
import nats.errors
from nats.aio.client import Client as Client  # re-exported: services annotate with bus.Client
from nats.aio.msg import Msg
from nats.js.api import ObjectInfo, ObjectMetaOptions, ObjectStoreConfig
from nats.js.client import JetStreamContext
from nats.js.errors import BucketNotFoundError, ObjectNotFoundError
from nats.js.object_store import ObjectStore

from . import envelopes, lifecycle, metrics, nats_env
from .exchange import Tick
from .subjects import PAYLOAD_READERS, Subjects
from .subjects import from_env as subjects_from_env

log = logging.getLogger("ezat.bus")

# Payloads up to this size travel inline; larger ones go to the object store. Kept below the
# server's max_payload so the envelope around the body still fits.
INLINE_LIMIT_MARGIN = 64 * 1024
CLAIM_TTL_SECONDS = 15 * 60
CHUNK_SIZE = 128 * 1024  # nats-py's object-store chunk
# The previous release's bucket, asked once: the strict NATS users never answer (refused).
LEGACY_LOOKUP_TIMEOUT = 1.0
# The longest a claim's read may take: a 32 MB payload reads in about a second; nats-py's
# ordered consumer waits for ever for a chunk that never comes, and its holder would beat for
# the request meanwhile (docs/architecture.md, "Large payloads").
TAKE_TIMEOUT = 60.0
# What a client is told when a claim cannot be read or written: the gateway's trouble, retried.
CLAIM_UNAVAILABLE = "the gateway could not move the request body; retry shortly"
# First letter of an inbox token that carries acknowledgements (request tokens are digits).
ACK = "a"


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


class Claims:
    """Claim checks: payloads too large for a message, stored in a JetStream Object Store bucket
    and named by a key (docs/architecture.md, "Large payloads").

    One bucket per receiving side (``Subjects.payload_bucket``): ``pack(data, to)`` only puts into
    the receiver's bucket (a chunk and a meta message, no read of the bucket), ``unpack`` reads and
    deletes from ``reads``, this process's own. The NATS users grant exactly that, so a service
    can neither read nor alter what is on its way to another (deploy/k8s/nats.yaml).
    """

    def __init__(
        self,
        nc: Client,
        subjects: Subjects,
        reads: str | None,
        replicas: int | None = None,
    ) -> None:
        self._nc = nc
        self._subjects = subjects
        self._bucket = subjects.payload_bucket(reads) if reads is not None else None
        # JetStream replicas of the bucket (its stream OBJ_<bucket>): EZAT_JETSTREAM_REPLICAS.
        self._replicas = nats_env.replicas() if replicas is None else replicas
        self._store: ObjectStore | None = None
        # The single bucket of the releases before per-receiver buckets: looked up once, at the
        # first claim not found in this one (docs/reliability.md, "Upgrading to per-service NATS
        # inboxes and buckets"); None when it is gone or this user may not read it.
        self._legacy: ObjectStore | bool | None = False  # False: not looked up yet
        self._lock = asyncio.Lock()
        self._reconcile: asyncio.Task[bool] | None = None

    @property
    def inline_limit(self) -> int:
        return max(self._nc.max_payload - INLINE_LIMIT_MARGIN, 1024)

    async def open(self) -> None:
        """Make this process's bucket (its reader makes it: the senders may not), before the
        service takes work, so that a sender never finds it missing."""
        await self._obs()

    async def _obs(self) -> ObjectStore:
        if self._bucket is None:
            raise RuntimeError("this process reads no claim checks")
        if self._store is None:
            async with self._lock:
                if self._store is None:
                    js = self._nc.jetstream()
                    try:
                        self._store = await js.object_store(self._bucket)
                    except BucketNotFoundError:
                        config = ObjectStoreConfig(ttl=CLAIM_TTL_SECONDS, replicas=self._replicas)
                        self._store = await js.create_object_store(self._bucket, config=config)
                    else:
                        # Made before with another count: moved in the background, never
                        # in the way of this claim.
                        self._reconcile = asyncio.create_task(
                            nats_env.reconcile_replicas(js, f"OBJ_{self._bucket}", self._replicas)
                        )
        return self._store

    async def put(self, data: bytes, to: str) -> str:
        """Store ``data`` for ``to`` (one of ``PAYLOAD_READERS``); returns its claim name."""
        name = uuid.uuid4().hex
        await put_only(self._nc.jetstream(), self._subjects.payload_bucket(to), name, data)
        return name

    async def _legacy_store(self) -> ObjectStore | None:
        if self._legacy is False:
            js = self._nc.jetstream(timeout=LEGACY_LOOKUP_TIMEOUT)
            try:
                self._legacy = await js.object_store(self._subjects.legacy_payload_bucket)
            except (nats.errors.Error, TimeoutError):  # gone, or refused (the strict NATS users)
                self._legacy = None
        assert not isinstance(self._legacy, bool)
        return self._legacy

    async def _get(self, name: str) -> tuple[ObjectStore, bytes]:
        """The store ``name`` was found in and its payload, its chunks written into one growing
        buffer: nats-py's own ``get`` appends each chunk to an immutable ``bytes``
        (``data += chunk``), which copies all that came before per 128 KiB chunk, quadratic:
        about 7 s of the event loop and ~2x the payload in memory for a 30 MB body on a loaded
        two-core machine (docs/reliability.md, "Large bodies")."""
        obs = await self._obs()
        buf = io.BytesIO()
        try:
            await obs.get(name, writeinto=buf)
        except ObjectNotFoundError:
            # Put by a pod of the previous release (a rolling upgrade) into the shared bucket.
            legacy = await self._legacy_store()
            if legacy is None:
                raise
            obs, buf = legacy, io.BytesIO()
            await legacy.get(name, writeinto=buf)
        return obs, buf.getvalue()

    async def take(self, name: str) -> bytes:
        """Read a claimed payload and delete it: each claim is read by one consumer; a read
        past ``TAKE_TIMEOUT`` raises ``TimeoutError``."""
        async with asyncio.timeout(TAKE_TIMEOUT):
            obs, data = await self._get(name)
        try:
            await obs.delete(name)
        except Exception:  # the TTL removes it anyway
            log.debug("claim %s not deleted", name)
        return data

    async def pack(self, data: bytes, to: str) -> tuple[bytes, str | None]:
        """(inline bytes, None) when it fits a message, else (b"", claim name in ``to``'s
        bucket)."""
        if len(data) <= self.inline_limit:
            return data, None
        return b"", await self.put(data, to)

    async def pack_reply(self, data: bytes, reply_to: str) -> tuple[bytes, str | None]:
        """``pack`` for the service whose inbox ``reply_to`` is (the router answers edges and
        translators); the subject is only looked at for a payload that needs a claim."""
        if len(data) <= self.inline_limit:
            return data, None
        to = self._subjects.inbox_service(reply_to)
        if to not in PAYLOAD_READERS:
            raise ValueError(f"no claim-check bucket for replies to {reply_to}")
        return await self.pack(data, to)

    async def unpack(self, data: bytes, ref: str | None) -> bytes:
        return await self.take(ref) if ref else data


async def put_only(js: JetStreamContext, bucket: str, name: str, data: bytes) -> None:
    """nats-py's ``ObjectStore.put`` without its reads: chunks on a fresh subject, then the meta
    message (a roll-up of the name's subject), each acknowledged by the stream. nats-py first
    looks the name up (STREAM.MSG.GET, which reads any message of the stream by sequence): a
    sender may not, and its names are new anyway. Chunks of a failed put are not purged (a
    sender may not purge either): the bucket's TTL removes them."""
    nuid = uuid.uuid4().hex
    chunk_subject = f"$O.{bucket}.C.{nuid}"
    digest = hashlib.sha256()
    chunks = 0
    for at in range(0, len(data), CHUNK_SIZE):
        piece = data[at : at + CHUNK_SIZE]
        digest.update(piece)
        await js.publish(chunk_subject, piece)
        chunks += 1
    info = ObjectInfo(
        name=name,
        bucket=bucket,
        nuid=nuid,
        size=len(data),
        chunks=chunks,
        mtime=datetime.now(UTC).isoformat(),
        digest="SHA-256=" + base64.urlsafe_b64encode(digest.digest()).decode(),
        options=ObjectMetaOptions(max_chunk_size=CHUNK_SIZE),
    )
    meta_subject = f"$O.{bucket}.M.{base64.urlsafe_b64encode(name.encode()).decode()}"
    await js.publish(
        meta_subject, json.dumps(info.as_dict()).encode(), headers={"Nats-Rollup": "sub"}
    )


class Inbox:
    """One wildcard subscription per process; each request gets its own queue by sequence number.

    Cheaper than a subscription per request, and replies for a request that has gone away are
    dropped instead of piling up.
    """

    def __init__(self, nc: Client, subjects: Subjects, instance: str) -> None:
        self._nc = nc
        self._prefix = subjects.inbox(instance)
        self._ack_prefix = f"{self._prefix}.{ACK}"
        self._seq = itertools.count(1)
        self._queues: dict[str, asyncio.Queue[Msg] | asyncio.Queue[Msg | Tick]] = {}
        self._sub: Any = None

    async def start(self) -> None:
        self._sub = await self._nc.subscribe(self._prefix + ".*", cb=self._on_msg)

    async def _on_msg(self, msg: Msg) -> None:
        token = msg.subject.rsplit(".", 1)[-1]
        queue = self._queues.get(token)
        if queue is not None:
            queue.put_nowait(msg)

    def open(self) -> tuple[str, str, asyncio.Queue[Msg]]:
        queue: asyncio.Queue[Msg] = asyncio.Queue()
        token, subject = self.attach(queue)
        return token, subject, queue

    def attach(self, queue: asyncio.Queue[Msg] | asyncio.Queue[Msg | Tick]) -> tuple[str, str]:
        """A token and reply subject for ``queue``: a relay's queue also holds its driver's
        ``Tick``s (exchange.py)."""
        token = str(next(self._seq))
        self._queues[token] = queue
        # The request's acknowledgement subject (``ack_subject``) feeds the same queue.
        self._queues[ACK + token] = queue
        return token, f"{self._prefix}.{token}"

    def ack_subject(self, token: str) -> str:
        """Where the usage outbox acknowledges this request's record (``ack_subject_of`` its
        reply subject); its messages arrive in the request's queue, told apart by ``is_ack``."""
        return self._ack_prefix + token

    def is_ack(self, msg: Msg) -> bool:
        # Asked of every reply a request receives: one prefix test, no split.
        return msg.subject.startswith(self._ack_prefix)

    def close(self, token: str) -> None:
        self._queues.pop(token, None)
        self._queues.pop(ACK + token, None)

    async def stop(self) -> None:
        """Unsubscribe (an inbox of one request's lifetime, e.g. its image downloads)."""
        self._queues.clear()
        if self._sub is not None:
            try:
                await self._sub.unsubscribe()
            except Exception as exc:  # the connection is gone; so is the subscription
                log.debug("inbox not unsubscribed: %s", type(exc).__name__)
            self._sub = None


def ack_subject_of(reply_subject: str) -> str:
    """The acknowledgement subject of an inbox reply subject (``Inbox.open``): where the router
    has the outbox acknowledge a request's usage record to the edge that holds its final reply
    (docs/billing.md). Derived, so no envelope carries it."""
    prefix, _, token = reply_subject.rpartition(".")
    return f"{prefix}.{ACK}{token}"


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
