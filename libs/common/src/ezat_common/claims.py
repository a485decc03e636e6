"""Claim checks: payloads above ``max_payload`` kept in a JetStream Object Store bucket, named
by a key the message carries instead (docs/architecture.md, "Large payloads"). Re-exported by
``bus``, where the services reach them (``bus.Claims``).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import json
import logging
import uuid
from datetime import UTC, datetime

import nats.errors
from nats.aio.client import Client
from nats.js.api import ObjectInfo, ObjectMetaOptions, ObjectStoreConfig
from nats.js.client import JetStreamContext
from nats.js.errors import BucketNotFoundError, ObjectNotFoundError
from nats.js.object_store import ObjectStore

from . import nats_env
from .subjects import PAYLOAD_READERS, Subjects

# The logger of ``bus``, which these lived in: its configuration and log lines stay as they were.
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
