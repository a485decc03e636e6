"""Handlers without NATS nor PostgreSQL: ``ack_for`` answers ok=false only when not stored;
``page_for`` answers an undecodable query through the shared handler."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import cast

import asyncpg
import msgspec
import pytest
from ezat_billing import config
from ezat_billing.batcher import Batcher
from ezat_billing.core.rows import UsageRow
from ezat_billing.handlers import Handlers
from ezat_billing.store import Stored
from ezat_common import envelopes
from ezat_common.outbox import Outbox
from ezat_common.usage_page import UsageError
from prometheus_client import REGISTRY
from support.config import SONNET, model, parsed

from .factories import record

CONFIG = parsed(models=[model(SONNET)])


class DeadOutbox:
    """JetStream unavailable: every put fails."""

    def __init__(self, works: bool = False) -> None:
        self.works = works
        self.puts: list[str] = []

    async def put(
        self, msg_id: str, data: bytes, timeout: float, traceparent: str | None = None
    ) -> bool:
        self.puts.append(msg_id)
        return self.works


class SlowStore:
    """A PostgreSQL whose commit takes ``delay``, then succeeds."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.committed: list[str] = []

    async def write(self, rows: Sequence[UsageRow]) -> dict[str, Stored]:
        await asyncio.sleep(self.delay)
        self.committed += [r.uid for r in rows]
        return {r.uid: Stored(r.cost_micros, True) for r in rows}

    async def probe(self, rows: Sequence[UsageRow]) -> dict[str, int]:
        return {}


def handlers(batcher: Batcher, outbox: DeadOutbox, ack_deadline: float) -> Handlers:
    settings = config.from_config(CONFIG, ack_deadline=ack_deadline)
    return Handlers(settings, batcher, cast(asyncpg.Pool, None), cast(Outbox, outbox))


async def test_a_commit_slower_than_the_deadline_is_answered_ok_not_refused() -> None:
    """The row's transaction is in flight at the deadline: the answer waits for its outcome.

    Formerly an outer wait_for cancelled the wait at deadline + 0.1 s and answered ok=false
    (outbox down) while the transaction went on to commit: charged, yet told "not charged"."""
    db = SlowStore(delay=0.5)
    batcher = Batcher(db.write, db.probe, deadline=0.1)
    batcher.start()
    outbox = DeadOutbox()
    try:
        rec = record(uid="uid-slow")
        ack = await handlers(batcher, outbox, ack_deadline=0.1).ack_for(envelopes.encode(rec))
    finally:
        await batcher.stop(timeout=1.0)
    assert db.committed == ["uid-slow"]
    assert ack is not None and ack.ok and ack.cost_micros > 0
    assert outbox.puts == []


async def test_a_row_still_queued_at_the_deadline_is_refused_and_never_written() -> None:
    db = SlowStore(delay=0.4)
    batcher = Batcher(db.write, db.probe, deadline=0.1, max_batch=1)
    batcher.start()
    outbox = DeadOutbox()
    h = handlers(batcher, outbox, ack_deadline=0.1)
    try:
        first = asyncio.create_task(h.ack_for(envelopes.encode(record(uid="uid-a"))))
        await asyncio.sleep(0.02)  # uid-a is being written; uid-b waits behind it
        ack = await h.ack_for(envelopes.encode(record(uid="uid-b")))
        assert ack is not None and not ack.ok and ack.error and "not charged" in ack.error
        assert outbox.puts == ["uid-b"]  # the outbox copy is keyed by the uid
        first_ack = await first
        assert first_ack is not None and first_ack.ok
        await asyncio.sleep(0.5)
    finally:
        await batcher.stop(timeout=1.0)
    assert db.committed == ["uid-a"]  # the refused row is never written


async def test_billing_stopping_mid_write_does_not_answer_not_stored() -> None:
    async def hung(rows: Sequence[UsageRow]) -> dict[str, Stored]:
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")

    async def no_probe(rows: Sequence[UsageRow]) -> dict[str, int]:
        return {}

    for outbox, expected_ok in ((DeadOutbox(), None), (DeadOutbox(works=True), True)):
        batcher = Batcher(hung, no_probe, deadline=0.05)
        batcher.start()
        h = handlers(batcher, outbox, ack_deadline=0.05)
        pending = asyncio.create_task(h.ack_for(envelopes.encode(record(uid="uid-doubt"))))
        await asyncio.sleep(0.1)
        await batcher.stop(timeout=0.1)
        ack = await asyncio.wait_for(pending, 2)
        if expected_ok is None:
            assert ack is None  # outcome unknown: no answer rather than "not charged"
        else:
            assert ack is not None and ack.ok  # the outbox copy is idempotent on the uid
        assert outbox.puts == ["uid-doubt"]


async def test_an_undecodable_usage_query_is_logged_once_counted_and_answered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The shared handler (ezat_common.undecodable) names kind and subject; the answer is the
    same ``UsageError`` as before."""
    db = SlowStore(delay=0)
    h = handlers(Batcher(db.write, db.probe), DeadOutbox(), ack_deadline=0.1)
    before = undecodable_count("usage_query")
    with caplog.at_level(logging.WARNING, logger="ezat.undecodable"):
        reply = await h.page_for(b"\x93not msgpack", "ezat.billing.usage.query")
    assert undecodable_count("usage_query") == before + 1
    [warning] = caplog.records
    assert warning.getMessage() == "undecodable usage_query message on ezat.billing.usage.query"
    with pytest.raises(msgspec.DecodeError) as caught:
        envelopes.decode_usage_query(b"\x93not msgpack")
    assert reply == envelopes.encode(UsageError(error=f"invalid usage query: {caught.value}"))


def undecodable_count(message: str) -> float:
    labels = {"message": message}
    return REGISTRY.get_sample_value("ezat_undecodable_messages_total", labels) or 0.0
