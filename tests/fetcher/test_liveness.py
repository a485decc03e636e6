"""The translator's wait follows the fetcher's liveness: a real fetcher process (``python -m
ezat_fetcher``) downloading from a loopback server that stalls, SIGKILLed mid-download.

While the fetcher holds the download it beats the translator's reply subject every second, so
the wait outlives ``OWNER_TIMEOUT``; once it is dead, the wait ends ``OWNER_TIMEOUT`` after the
last beat with a 503 naming the part (it used to be the translator's fixed 20 s).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import nats
import nats.errors
import pytest
import pytest_asyncio
from ezat_common import bus, liveness
from ezat_common.errors import GatewayError
from ezat_common.subjects import IMAGES, Subjects
from ezat_translator import images
from ezat_translator.core.openai_messages import ImageUrlPart

from .conftest import ImageServer
from .test_shares import warm_up


@pytest_asyncio.fixture(loop_scope="session")
async def fetcher_process(
    nats_url: str, tmp_path: Path
) -> AsyncIterator[tuple[subprocess.Popen[bytes], Subjects]]:
    config = tmp_path / "ezat.toml"
    config.write_text('[fetcher]\nallow_networks = ["127.0.0.0/8"]\n')
    subjects = Subjects(prefix=f"t{uuid.uuid4().hex[:10]}")
    env = os.environ | {
        "EZAT_CONFIG": str(config),
        "NATS_URL": nats_url,
        "EZAT_SUBJECT_PREFIX": subjects.prefix,
        "EZAT_LOG_LEVEL": "WARNING",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "ezat_fetcher"], env=env, stdout=subprocess.DEVNULL
    )
    nc = await nats.connect(nats_url)
    try:
        for _ in range(300):  # a loaded machine may take a while to import everything
            try:
                await nc.request(subjects.health("fetcher"), b"", timeout=0.2)
                break
            except (nats.errors.NoRespondersError, nats.errors.TimeoutError):
                assert proc.poll() is None, "the fetcher process exited"
                await asyncio.sleep(0.05)
        else:
            raise AssertionError("the fetcher process never became ready")
        await warm_up(nc, subjects)
    finally:
        await nc.close()
    try:
        yield proc, subjects
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=5)


async def test_a_killed_fetcher_ends_the_wait_within_the_owner_timeout(
    nats_url: str,
    image_server: ImageServer,
    fetcher_process: tuple[subprocess.Popen[bytes], Subjects],
) -> None:
    proc, subjects = fetcher_process
    tag = f"kill-{uuid.uuid4().hex[:6]}"
    nc = await nats.connect(nats_url)
    body = {"messages": [{"role": "user", "content": [{"type": "image"}]}]}
    part = ImageUrlPart("messages[0].content[0].image_url.url", image_server.stall_url(tag), 0, 0)
    task = asyncio.create_task(
        (await downloads(nc, subjects)).inline("rid", body, [part], key_id="k", uid="u1")
    )
    try:
        deadline = time.monotonic() + 5
        while image_server.hits(tag) == 0:
            assert time.monotonic() < deadline, "the download never reached the server"
            await asyncio.sleep(0.02)
        # Alive and beating: the wait goes on past the owner timeout.
        await asyncio.sleep(liveness.OWNER_TIMEOUT + 0.5)
        assert not task.done()
        proc.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        with pytest.raises(GatewayError) as info:
            await asyncio.wait_for(task, 10)
        waited = time.monotonic() - killed
    finally:
        task.cancel()
        await nc.close()
    assert info.value.status == 503 and info.value.retry_after
    assert info.value.message == (
        "messages[0].content[0].image_url.url: the image could not be downloaded right now; "
        "retry shortly"
    )
    # OWNER_TIMEOUT after the last beat, which came at most one interval before the kill.
    low = liveness.OWNER_TIMEOUT - liveness.HEARTBEAT_INTERVAL - 0.2
    assert low < waited < liveness.OWNER_TIMEOUT + 1.0, f"waited {waited:.2f} s after the kill"
    print(f"wait after SIGKILL: {waited:.2f} s")


async def test_no_fetcher_at_all_is_a_503_at_once(nats_url: str) -> None:
    subjects = Subjects(prefix=f"t{uuid.uuid4().hex[:10]}")  # nobody subscribes here
    nc = await nats.connect(nats_url)
    body = {"messages": [{"role": "user", "content": [{"type": "image"}]}]}
    part = ImageUrlPart("messages[0].content[0].image_url.url", "https://example.com/a.png", 0, 0)
    started = time.monotonic()
    try:
        with pytest.raises(GatewayError) as info:
            await (await downloads(nc, subjects)).inline("rid", body, [part], key_id="k", uid="u")
    finally:
        await nc.close()
    took = time.monotonic() - started
    assert took < 0.5
    print(f"503 with no fetcher: {took * 1000:.0f} ms")
    assert info.value.status == 503 and info.value.retry_after == 2
    assert info.value.param == "messages[0].content[0].image_url.url"


async def downloads(nc: nats.NATS, subjects: Subjects) -> images.Images:
    """The translator's image downloads, on an inbox of their own."""
    d = images.Images(nc, subjects, bus.Claims(nc, subjects, IMAGES), f"tr-{uuid.uuid4().hex[:8]}")
    await d.start()
    return d
