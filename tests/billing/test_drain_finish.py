"""A stopping billing ends its outbox drain between rounds (``Drain.finish``), through real NATS:
the batch it is writing is still acknowledged, so no message waits out ``ACK_WAIT`` (30 s)
unacknowledged before another replica may store it (docs/reliability.md, "A record unbilled
after a rolling restart")."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence

import nats
from ezat_billing.core.pricing import cost_micros
from ezat_billing.core.rows import UsageRow, to_row
from ezat_billing.drain import DURABLE, Drain
from ezat_billing.store import Stored
from ezat_common import envelopes
from ezat_common.envelopes import UsageRecord
from ezat_common.outbox import Outbox
from ezat_common.subjects import Subjects

from .factories import SONNET, record

N = 5


def row_for(rec: UsageRecord) -> UsageRow:
    return to_row(rec, SONNET, cost_micros(rec, SONNET))


async def test_a_drain_told_to_finish_acknowledges_the_batch_it_is_writing(nats_url: str) -> None:
    nc = await nats.connect(nats_url)
    try:
        subjects = Subjects(f"t{uuid.uuid4().hex[:8]}")
        outbox = Outbox(nc, subjects, replicas=1)
        await outbox.ensure_stream()
        records = [record(uid=f"uid_{uuid.uuid4().hex}") for _ in range(N)]
        for rec in records:  # all there before the first fetch: one batch
            assert await outbox.put(rec.uid, envelopes.encode(rec), timeout=2)
        writing, release = asyncio.Event(), asyncio.Event()
        written: list[str] = []

        async def write(rows: Sequence[UsageRow]) -> dict[str, Stored]:
            writing.set()
            await release.wait()  # the stop comes while the batch is being written
            written.extend(r.uid for r in rows)
            return {r.uid: Stored(r.cost_micros, True) for r in rows}

        async def confirm(uids: Sequence[str]) -> None:
            return None

        drain = Drain(nc, subjects, outbox, row_for, write, confirm)
        task = asyncio.create_task(drain.run())
        async with asyncio.timeout(10):
            await writing.wait()
        drain.finish()
        release.set()
        async with asyncio.timeout(10):
            await task  # returns: no cancellation needed
        assert sorted(written) == sorted(rec.uid for rec in records)
        # The acks are published without waiting for the server: give it a moment to count
        # them (far less than ACK_WAIT, 30 s). Cancelled mid-write instead (the stop before),
        # all N stayed pending for ACK_WAIT.
        js = nc.jetstream()
        info = await js.consumer_info(subjects.outbox_stream, DURABLE)
        for _ in range(50):
            if (info.num_ack_pending, info.num_pending) == (0, 0):
                break
            await asyncio.sleep(0.1)
            info = await js.consumer_info(subjects.outbox_stream, DURABLE)
        assert (info.num_ack_pending, info.num_pending) == (0, 0), info
    finally:
        await nc.close()
