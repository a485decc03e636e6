"""The heartbeat registry (docs/reliability.md): who gets a beat, and when. Real NATS."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import nats
import pytest
from ezat_common import envelopes
from ezat_common.envelopes import Heartbeat
from ezat_common.liveness import Heartbeats
from nats.aio.client import Client
from nats.aio.msg import Msg

INTERVAL = 0.2


@pytest.fixture
async def nc(nats_url: str) -> AsyncIterator[Client]:
    conn = await nats.connect(nats_url)
    yield conn
    await conn.close()


async def listen(nc: Client, subject: str) -> list[envelopes.Reply]:
    heard: list[envelopes.Reply] = []

    async def on_msg(msg: Msg) -> None:
        heard.append(envelopes.decode_reply(msg.data))

    await nc.subscribe(subject, cb=on_msg)
    await nc.flush()
    return heard


async def test_a_request_that_finishes_within_an_interval_is_never_beaten(nc: Client) -> None:
    beats = Heartbeats(nc, INTERVAL)
    subject = f"hb.{uuid.uuid4().hex}"
    heard = await listen(nc, subject)
    beats.open(subject)
    assert await beats.beat_once() == 0
    beats.close(subject)
    await asyncio.sleep(INTERVAL)
    assert await beats.beat_once() == 0
    await nc.flush()
    assert heard == []


async def test_a_held_subject_is_beaten_once_per_interval_with_its_stream_flag(
    nc: Client,
) -> None:
    beats = Heartbeats(nc, INTERVAL)
    stream, body = f"hb.{uuid.uuid4().hex}", f"hb.{uuid.uuid4().hex}"
    heard_stream, heard_body = await listen(nc, stream), await listen(nc, body)
    beats.open(stream, stream=True)
    beats.open(body)
    await asyncio.sleep(INTERVAL)
    assert await beats.beat_once() == 2
    assert await beats.beat_once() == 0  # just beaten: not again within the interval
    await nc.flush()
    await asyncio.sleep(0.05)
    assert heard_stream == [Heartbeat(stream=True)]
    assert heard_body == [Heartbeat(stream=False)]


async def test_the_beat_task_keeps_a_held_subject_hearing_from_its_holder(nc: Client) -> None:
    beats = Heartbeats(nc, INTERVAL)
    subject = f"hb.{uuid.uuid4().hex}"
    heard = await listen(nc, subject)
    beats.open(subject)
    beats.start()
    try:
        await asyncio.sleep(INTERVAL * 5.2)
    finally:
        await beats.stop()
    # One beat every 1 to 1.5 intervals after the first interval.
    assert 3 <= len(heard) <= 5
    beats.close(subject)
    assert len(beats) == 0


async def test_opening_a_held_subject_again_changes_its_beat_not_when_it_is_due(
    nc: Client,
) -> None:
    """The translator holds a request from the moment it takes it and learns only after the
    translation whether it streams: opening it again must not push its next beat back (a long
    translation would leave the edge a whole owner timeout of silence)."""
    beats = Heartbeats(nc, INTERVAL)
    subject = f"hb.{uuid.uuid4().hex}"
    heard = await listen(nc, subject)
    beats.open(subject)
    await asyncio.sleep(INTERVAL)
    beats.open(subject, stream=True)
    assert await beats.beat_once() == 1  # due since the first opening
    await nc.flush()
    await asyncio.sleep(0.05)
    assert heard == [Heartbeat(stream=True)]
