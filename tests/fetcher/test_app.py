"""Wiring of the fetcher process (app.py): config, subscription, health probe, graceful stop."""

from __future__ import annotations

import asyncio
import logging
import uuid
from pathlib import Path

import nats
import pytest
from ezat_common import envelopes, logs
from ezat_common.config import ConfigError, FetcherConfig
from ezat_common.subjects import Subjects
from ezat_fetcher import app
from ezat_fetcher.core.fairness import Limits

from .conftest import PNG, ImageServer


def test_bad_allow_networks_fail_at_start() -> None:
    with pytest.raises(ConfigError, match=r"^fetcher\.allow_networks: `10\.0\.0\.0/33` is not"):
        app.allowed_networks(FetcherConfig(allow_networks=["10.0.0.0/33"]))


def test_fair_share_limits_come_from_the_config() -> None:
    shares = app.limits(FetcherConfig(max_concurrent=16, max_per_key=4, max_per_request=2))
    assert (shares.total, shares.per_key, shares.per_request, shares.queued_per_key) == (
        16,
        4,
        2,
        200,
    )
    assert app.limits(FetcherConfig()) == Limits()  # the documented defaults: 32, 8, 4, 200


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"max_concurrent": 0}, "fetcher.max_concurrent: must be at least 1"),
        ({"max_per_key": 64}, "fetcher.max_per_key: must not exceed max_concurrent"),
        ({"max_per_request": 9}, "fetcher.max_per_request: must not exceed max_per_key"),
        ({"max_queued_per_key": 0}, "fetcher.max_queued_per_key: must be at least 1"),
    ],
)
def test_bad_fair_share_limits_fail_at_start(fields: dict[str, int], error: str) -> None:
    with pytest.raises(ConfigError) as info:
        app.limits(FetcherConfig(**fields))  # type: ignore[arg-type]
    assert str(info.value) == error


async def test_main_serves_fetches_and_health_then_stops(
    nats_url: str,
    image_server: ImageServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = tmp_path / "ezat.toml"
    config.write_text('[fetcher]\nallow_networks = ["127.0.0.0/8"]\n')
    prefix = f"t{uuid.uuid4().hex[:10]}"
    monkeypatch.setenv("EZAT_CONFIG", str(config))
    monkeypatch.setenv("NATS_URL", nats_url)
    monkeypatch.setenv("EZAT_SUBJECT_PREFIX", prefix)
    # logs.setup would replace the root handlers, which pytest's log capture relies on.
    monkeypatch.setattr(logs, "setup", lambda service: logging.getLogger(f"ezat.{service}"))
    subjects = Subjects(prefix=prefix)
    stop = asyncio.Event()
    service = asyncio.create_task(app.main(stop))
    nc = await nats.connect(nats_url)
    try:
        health = await _probe(nc, subjects)
        assert (health.service, health.ok) == ("fetcher", True)
        req = envelopes.FetchRequest(request_id="r", url=image_server.url("/png"), part="p")
        reply = await nc.request(subjects.fetch, envelopes.encode(req), timeout=5)
        assert envelopes.decode_fetch_result(reply.data).data == PNG
        stop.set()
        await asyncio.wait_for(service, 5)
    finally:
        service.cancel()
        await nc.close()


async def _probe(nc: nats.NATS, subjects: Subjects) -> envelopes.HealthReply:
    # The service subscribes shortly after the task starts; retry until it answers.
    for _ in range(50):
        try:
            msg = await nc.request(subjects.health("fetcher"), b"", timeout=0.2)
        except (nats.errors.NoRespondersError, nats.errors.TimeoutError):
            await asyncio.sleep(0.05)
            continue
        return envelopes.decode_health(msg.data)
    raise AssertionError("the fetcher never answered its health probe")
