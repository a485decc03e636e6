"""The NATS handler against a real nats-server with JetStream (handlers.py)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator

import nats
import nats.errors
import pytest_asyncio
from ezat_common import bus, envelopes
from ezat_common.subjects import IMAGES, Subjects
from ezat_fetcher.core.addresses import parse_networks
from ezat_fetcher.download import Fetcher
from ezat_fetcher.handlers import UNREADABLE, FetchService
from nats.aio.client import Client
from prometheus_client import REGISTRY

from .conftest import BIG_PNG, PNG, ImageServer


@pytest_asyncio.fixture(loop_scope="session")
async def wired(nats_url: str) -> AsyncIterator[tuple[Client, Subjects]]:
    # A prefix of its own, so this test hears nobody else's fetch requests.
    subjects = Subjects(prefix=f"t{uuid.uuid4().hex[:10]}")
    service_nc = await nats.connect(nats_url)
    client_nc = await nats.connect(nats_url)
    service = FetchService(
        service_nc, subjects, Fetcher(parse_networks(["127.0.0.0/8"]), timeout=1)
    )
    await service.start()
    await service_nc.flush()
    # The bucket of large downloads is the translator's, made by it (the fetcher only puts).
    await bus.Claims(client_nc, subjects, IMAGES).open()
    # Seen once in CI: the first request right after the subscription got "no responders".
    # Start the tests only once the service answers this connection (an unreadable request is
    # answered at once, with no download).
    for _ in range(100):
        try:
            await client_nc.request(subjects.fetch, b"\x93warm-up", timeout=2)
            break
        except nats.errors.NoRespondersError:
            await asyncio.sleep(0.05)
    try:
        yield client_nc, subjects
    finally:
        await service.stop(grace=1)
        await client_nc.close()
        await service_nc.close()


async def ask(nc: Client, subjects: Subjects, url: str, **kwargs: object) -> envelopes.FetchResult:
    req = envelopes.FetchRequest(
        request_id="req-1", url=url, part="messages[0].content[1].image_url.url", **kwargs
    )  # type: ignore[arg-type]
    msg = await nc.request(subjects.fetch, envelopes.encode(req), timeout=10)
    return envelopes.decode_fetch_result(msg.data)


async def test_request_reply_over_nats(
    wired: tuple[Client, Subjects], image_server: ImageServer
) -> None:
    nc, subjects = wired

    ok = await ask(nc, subjects, image_server.url("/png"))
    assert (ok.request_id, ok.ok, ok.media_type, ok.data, ok.data_ref) == (
        "req-1",
        True,
        "image/png",
        PNG,
        None,
    )

    failed = await ask(nc, subjects, image_server.url("/status/404"))
    assert (failed.ok, failed.error, failed.data) == (
        False,
        "could not download the image (HTTP 404)",
        b"",
    )

    refused = await ask(nc, subjects, image_server.url("/png"), max_bytes=10)
    assert refused.error == "could not download the image (larger than 10 bytes)"

    # Above NATS max_payload: the bytes travel as a claim check in the object store.
    claims = bus.Claims(nc, subjects, IMAGES)
    big = await ask(nc, subjects, image_server.url("/big.png"))
    assert big.ok and big.data == b"" and big.data_ref
    assert await claims.take(big.data_ref) == BIG_PNG

    garbage = await nc.request(subjects.fetch, b"\x93not msgpack", timeout=10)
    assert envelopes.decode_fetch_result(garbage.data).error == UNREADABLE


async def test_a_slow_download_does_not_hold_up_others(
    wired: tuple[Client, Subjects], image_server: ImageServer
) -> None:
    nc, subjects = wired
    slow = asyncio.create_task(ask(nc, subjects, image_server.url("/slow")))
    await asyncio.sleep(0.1)
    started = time.monotonic()
    fast = await ask(nc, subjects, image_server.url("/png"))
    assert fast.ok and time.monotonic() - started < 0.5
    assert not slow.done()
    assert (await slow).error == "could not download the image (timed out after 1 s)"


def fetched_bytes(suffix: str, le: float | None = None) -> float:
    """A sample of the histogram; ``le`` picks a bucket by its bound (whatever its spelling)."""
    for family in REGISTRY.collect():
        for sample in family.samples:
            if sample.name != f"ezat_fetcher_fetched_bytes{suffix}":
                continue
            if le is None or float(sample.labels["le"]) == le:
                return sample.value
    return 0.0


MIB = 1024 * 1024


async def test_each_accepted_download_lands_in_fetched_bytes_by_its_size(
    wired: tuple[Client, Subjects], image_server: ImageServer
) -> None:
    nc, subjects = wired
    count, total = fetched_bytes("_count"), fetched_bytes("_sum")
    small = fetched_bytes("_bucket", le=1024)
    below_big = fetched_bytes("_bucket", le=2 * MIB)
    within_big = fetched_bytes("_bucket", le=5 * MIB)

    assert (await ask(nc, subjects, image_server.url("/png"))).ok
    assert (await ask(nc, subjects, image_server.url("/big.png"))).ok
    # Refused downloads are no accepted size.
    assert not (await ask(nc, subjects, image_server.url("/png"), max_bytes=10)).ok
    assert not (await ask(nc, subjects, image_server.url("/status/404"))).ok

    assert fetched_bytes("_count") - count == 2
    assert fetched_bytes("_sum") - total == len(PNG) + len(BIG_PNG)
    assert fetched_bytes("_bucket", le=1024) - small == 1  # the 64-byte PNG
    assert fetched_bytes("_bucket", le=2 * MIB) - below_big == 1  # 2 MiB + 8 is above
    assert fetched_bytes("_bucket", le=5 * MIB) - within_big == 2
