"""http(s) image URLs of a request, downloaded by the fetcher service and inlined as base64.

The fetcher is the only service that talks to arbitrary hosts; here we only ask it, enforce the
per-request budget (20 URLs, 32 MB in all), and name the failing part in the client's error.

The wait follows the fetcher's liveness, not a fixed time: each download's answer comes to a
reply subject of its own on the process's one image inbox (``Images``: one wildcard subscription
for every request, so a request with images costs no subscribe/unsubscribe round trips), and
while the fetcher holds the download (waiting for a fair share of its slots, then downloading) it
sends a ``Heartbeat`` there every second. Nothing at all for ``liveness.OWNER_TIMEOUT`` (3 s)
means the fetcher died: 503 with retry-after naming the part.
No fetcher subscribed at all: NATS answers "no responders" at once, and so do we.

All of a request's downloads share one deadline (``FETCH_DEADLINE``), sent with each of them:
the fetcher never starts one past it and cuts one running past it. When we give up early (a
download failed, the 32 MB budget ran out, the request was cancelled) we broadcast the request's
``CancelRequest`` so the fetcher drops the downloads still waiting or running for it.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import uuid
from typing import Any

import msgspec
from ezat_common import bus, envelopes, liveness, tracing
from ezat_common.errors import GatewayError
from ezat_common.subjects import Subjects
from ezat_common.undecodable import undecodable
from nats.aio.client import Client

from .core.turns import ImageUrlPart

log = logging.getLogger("ezat.translator.images")

MAX_URLS = 20
MAX_TOTAL_BYTES = 32 * 1024 * 1024
# Seconds for all of a request's downloads, queueing at the fetcher included (the fetcher's own
# limit is 15 s per download; fair shares may make a request with many URLs wait for slots).
FETCH_DEADLINE = 60.0

_decode_answer = msgspec.msgpack.Decoder(envelopes.FetchResult | envelopes.Heartbeat).decode


class Images:
    """The image downloads of every request of this process; their answers (and the fetcher's
    heartbeats) arrive on one inbox subscription, a queue per download."""

    def __init__(self, nc: Client, subjects: Subjects, claims: bus.Claims, instance: str) -> None:
        self._nc = nc
        self._subjects = subjects
        self._claims = claims
        self._answers = bus.Inbox(nc, subjects, f"{instance}-images")

    async def open(self) -> None:
        """Make the bucket the fetcher puts large downloads in (bus.Claims.open)."""
        await self._claims.open()

    async def start(self) -> None:
        await self.open()
        await self._answers.start()

    async def stop(self) -> None:
        await self._answers.stop()

    async def of_request(
        self,
        req: envelopes.ClientRequest,
        body: dict[str, Any],
        parts: list[ImageUrlPart],
        traceparent: str | None,
    ) -> None:
        """``inline`` for the parts of a client's request (its key's shares, its cancel)."""
        await self.inline(
            req.request_id, body, parts, key_id=req.key_id, uid=req.uid, traceparent=traceparent
        )

    async def inline(
        self,
        request_id: str,
        body: dict[str, Any],
        parts: list[ImageUrlPart],
        *,
        key_id: str = "",
        uid: str = "",
        traceparent: str | None = None,
    ) -> None:
        """Download every part's URL and put the bytes in its block. ``key_id`` and ``uid`` (the
        request's gateway-made identity) give the fetcher its fair shares and its cancellation;
        the edge's cancel of the request reaches the fetcher only when ``uid`` is its own.
        ``traceparent`` travels with each download (the fetcher's span is its child)."""
        if len(parts) > MAX_URLS:
            extra = parts[MAX_URLS]
            raise GatewayError(
                400,
                f"{extra.path}: at most {MAX_URLS} image URLs per request; send the rest inline",
                param=extra.path,
            )
        # Without the request's uid, one of our own: the fetcher must never take the
        # client-chosen request id (which other requests may share) for the identity it cancels by.
        uid = uid or f"images-{uuid.uuid4().hex}"
        deadline = asyncio.get_running_loop().time() + FETCH_DEADLINE
        # Downloads run concurrently; the 32 MB budget is checked as each one arrives, and the
        # first failure (or the budget running out) cancels the downloads still running.
        tasks = {
            asyncio.create_task(
                self._fetch(deadline, request_id, key_id, uid, part, traceparent)
            ): part
            for part in parts
        }
        pending: set[asyncio.Task[tuple[str, bytes]]] = set(tasks)
        try:
            total = 0
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    total += _put(body, tasks[task], *task.result(), total)
        finally:
            if pending:
                for task in pending:
                    task.cancel()
                await asyncio.gather(*pending, return_exceptions=True)
                # The fetcher still holds some of them: let it drop them (waiting or running).
                await _cancel_at_fetcher(self._nc, self._subjects, request_id, uid)
            for task in tasks:  # failures that finished with the one reported: already answered
                if task.done() and not task.cancelled():
                    task.exception()

    async def _fetch(
        self,
        deadline: float,
        request_id: str,
        key_id: str,
        uid: str,
        part: ImageUrlPart,
        traceparent: str | None,
    ) -> tuple[str, bytes]:
        loop = asyncio.get_running_loop()
        ask = envelopes.FetchRequest(
            request_id=request_id,
            url=part.url,
            part=part.path,
            key_id=key_id,
            uid=uid,
            timeout=max(0.001, deadline - loop.time()),
            fail_together=True,
            heartbeat=True,
        )
        token, inbox, queue = self._answers.open()
        try:
            try:
                await self._nc.publish(
                    self._subjects.fetch,
                    envelopes.encode(ask),
                    reply=inbox,
                    headers=tracing.headers(traceparent),
                )
            except Exception:
                raise _unavailable(part) from None
            answer = await _answer(queue, deadline + liveness.OWNER_TIMEOUT, part)
        finally:
            self._answers.close(token)
        if not answer.ok or answer.media_type is None:
            problem = answer.error or "could not download the image"
            if answer.retry_after is not None:  # the gateway's failure, not the URL's
                raise GatewayError(
                    503, f"{part.path}: {problem}", param=part.path, retry_after=answer.retry_after
                )
            raise GatewayError(400, f"{part.path}: {problem}", param=part.path)
        data = await self._claims.unpack(answer.data, answer.data_ref)
        return answer.media_type, data


def _put(body: dict[str, Any], part: ImageUrlPart, media_type: str, data: bytes, total: int) -> int:
    """Inline one download; its size, once the request's 32 MB budget is checked."""
    if total + len(data) > MAX_TOTAL_BYTES:
        raise GatewayError(
            400,
            f"{part.path}: the request's image downloads exceed 32 MB in all",
            param=part.path,
        )
    _block(body, part)["source"] = {
        "type": "base64",
        "media_type": media_type,
        "data": base64.b64encode(data).decode(),
    }
    return len(data)


async def _answer(
    queue: asyncio.Queue[Any], last_call: float, part: ImageUrlPart
) -> envelopes.FetchResult:
    """The fetcher's answer, while it beats; it answers by the deadline, and a live but wedged
    fetcher is given up on ``OWNER_TIMEOUT`` past it (``last_call``)."""
    loop = asyncio.get_running_loop()
    while True:
        wait = min(liveness.OWNER_TIMEOUT, last_call - loop.time())
        try:
            msg = await asyncio.wait_for(queue.get(), max(wait, 0.0))
        except TimeoutError:
            log.warning("the fetcher stopped answering", extra={"fields": {"part": part.path}})
            raise _unavailable(part) from None
        if bus.is_no_responders(msg):
            raise _unavailable(part)
        try:
            answer = _decode_answer(msg.data)
        except msgspec.DecodeError as exc:
            undecodable("fetch_result", msg.subject, exc)
            raise
        if isinstance(answer, envelopes.FetchResult):
            return answer


def _block(body: dict[str, Any], part: ImageUrlPart) -> dict[str, Any]:
    block: dict[str, Any] = body["messages"][part.message_index]["content"][part.block_index]
    if part.inner_index is not None:
        inner: dict[str, Any] = block["content"][part.inner_index]
        return inner
    return block


def _unavailable(part: ImageUrlPart, retry_after: float = 2) -> GatewayError:
    return GatewayError(
        503,
        f"{part.path}: the image could not be downloaded right now; retry shortly",
        param=part.path,
        retry_after=retry_after,
    )


async def _cancel_at_fetcher(nc: Client, subjects: Subjects, request_id: str, uid: str) -> None:
    try:
        cancel = envelopes.CancelRequest(request_id=request_id, uid=uid)
        await nc.publish(subjects.cancel, envelopes.encode(cancel))
    except Exception as exc:  # the deadline sent with each download bounds them anyway
        log.debug("fetch cancel not sent: %s", type(exc).__name__)
