"""http(s) image URLs of a request, downloaded by the fetcher service and inlined as base64.

The fetcher is the only service that talks to arbitrary hosts; here we only ask it, enforce the
per-request budget (20 URLs, 32 MB in all), and name the failing part in the client's error.
"""

from __future__ import annotations

import asyncio
import base64
from typing import Any

from ezat_common import bus, envelopes
from ezat_common.errors import GatewayError
from ezat_common.subjects import Subjects

from .core.openai_messages import ImageUrlPart

MAX_URLS = 20
MAX_TOTAL_BYTES = 32 * 1024 * 1024
FETCH_TIMEOUT = 20.0  # the fetcher's own limit is 15 s per download


async def inline_images(
    nc: bus.Client,
    subjects: Subjects,
    claims: bus.Claims,
    request_id: str,
    body: dict[str, Any],
    parts: list[ImageUrlPart],
) -> None:
    if len(parts) > MAX_URLS:
        extra = parts[MAX_URLS]
        raise GatewayError(
            400,
            f"{extra.path}: at most {MAX_URLS} image URLs per request; send the rest inline",
            param=extra.path,
        )
    # Downloads run concurrently; the 32 MB budget is checked as each one arrives, and the first
    # failure (or the budget running out) cancels the downloads still running.
    tasks = {
        asyncio.create_task(_fetch(nc, subjects, claims, request_id, part)): part for part in parts
    }
    total = 0
    pending: set[asyncio.Task[tuple[str, bytes]]] = set(tasks)
    try:
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                part = tasks[task]
                media_type, data = task.result()
                total += len(data)
                if total > MAX_TOTAL_BYTES:
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
    finally:
        if pending:
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)


def _block(body: dict[str, Any], part: ImageUrlPart) -> dict[str, Any]:
    block: dict[str, Any] = body["messages"][part.message_index]["content"][part.block_index]
    if part.inner_index is not None:
        inner: dict[str, Any] = block["content"][part.inner_index]
        return inner
    return block


async def _fetch(
    nc: bus.Client, subjects: Subjects, claims: bus.Claims, request_id: str, part: ImageUrlPart
) -> tuple[str, bytes]:
    ask = envelopes.FetchRequest(request_id=request_id, url=part.url, part=part.path)
    try:
        msg = await nc.request(subjects.fetch, envelopes.encode(ask), timeout=FETCH_TIMEOUT)
    except Exception:
        raise GatewayError(
            503,
            f"{part.path}: the image could not be downloaded right now; retry shortly",
            param=part.path,
            retry_after=2,
        ) from None
    result = envelopes.decode_fetch_result(msg.data)
    if not result.ok or result.media_type is None:
        problem = result.error or "could not download the image"
        raise GatewayError(400, f"{part.path}: {problem}", param=part.path)
    data = await claims.unpack(result.data, result.data_ref)
    return result.media_type, data
