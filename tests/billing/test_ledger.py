"""Tokens, money and records metrics equal the sums of the stored rows (ledger.py): the service
over real NATS and PostgreSQL, records through both paths (request/reply and the outbox), with
duplicates, early closes, failures, a late confirmation and a record voided as undelivered."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import asyncpg
import pytest
from ezat_billing import drain, ledger, settle
from ezat_common import envelopes
from ezat_common.envelopes import Delivered, UsageRecord
from ezat_common.outbox import Outbox
from nats.aio.msg import Msg
from prometheus_client import REGISTRY
from support.config import SONNET, model, parsed

from .factories import record
from .test_app import Running, running_billing, wait_ready
from .test_settle import age

HAIKU = "anthropic/claude-haiku-5"
MODELS = parsed(models=[model(SONNET), model(HAIKU, price={"input": 1.0, "output": 5.0})])
STATUSES = [(s, e) for s in ("complete", "client_closed", "failed") for e in ("true", "false")]


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def records_by_status() -> dict[tuple[str, str], float]:
    return {
        (s, e): sample("ezat_billing_records_total", status=s, estimated=e) for s, e in STATUSES
    }


async def publish(running: Running, data: bytes, msg_id: str) -> None:
    js = running.nc.jetstream()
    await js.publish(running.subjects.usage_outbox, data, headers={"Nats-Msg-Id": msg_id})


async def wait_drained(running: Running) -> None:
    js = running.nc.jetstream()
    for _ in range(200):
        info = await js.stream_info(running.subjects.outbox_stream)
        if info.state.messages == 0:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the outbox was never drained")


async def test_token_cost_and_record_counters_equal_the_sums_of_the_stored_rows(
    nats_url: str,
    database_url: str,
    pool: asyncpg.Pool,
    monkeypatch: pytest.MonkeyPatch,
    key_id: str,
) -> None:
    # Rows other tests left awaiting their confirmation would be settled (and counted) below.
    await settle.settle_due(pool, 0, time.time())
    region = f"region-{uuid.uuid4().hex[:8]}"  # this test's series alone
    dep_a, dep_b = f"a-{uuid.uuid4().hex[:6]}", f"b-{uuid.uuid4().hex[:6]}"
    statuses_before = records_by_status()
    acks_before = sample("ezat_billing_ack_seconds_count", outcome="stored")
    delays_before = sample("ezat_billing_outbox_store_delay_seconds_count")

    def rec(**fields: Any) -> UsageRecord:
        return record(key_id=key_id, region=region, uid=uuid.uuid4().hex, **fields)

    confirmed_late = rec(
        model=SONNET,
        deployment=dep_a,
        input_tokens=1200,
        cache_read_tokens=3000,
        cache_write_5m_tokens=400,
        output_tokens=250,
    )
    closed = rec(
        model=HAIKU,
        deployment=dep_b,
        status="client_closed",
        estimated=True,
        input_tokens=800,
        output_tokens=40,
    )
    failed = rec(model=HAIKU, deployment=dep_b, status="failed", input_tokens=500, output_tokens=0)
    paired = rec(
        model=SONNET,
        deployment=dep_b,
        input_tokens=2000,
        cache_write_1h_tokens=1000,
        output_tokens=900,
        reasoning_tokens=300,
    )
    lost = rec(model=HAIKU, deployment=dep_a, input_tokens=700, output_tokens=70)
    closed_early = rec(
        model=SONNET,
        deployment=dep_a,
        status="client_closed",
        estimated=True,
        input_tokens=0,
        output_tokens=0,
    )
    async with running_billing(nats_url, database_url, monkeypatch, cfg=MODELS) as running:
        await wait_ready(running)
        # Request/reply (the group commit); the first record twice: a retry, one row.
        for r in (confirmed_late, confirmed_late, closed, failed):
            assert (await running.record(envelopes.encode(r))).ok
        # The outbox (the drain): a record with its confirmation, one never confirmed, an early
        # close, the confirmation of the record stored above, and two redelivery-like copies.
        await Outbox(running.nc, running.subjects).ensure_stream()
        for r in (paired, lost, closed_early):
            await publish(running, envelopes.encode(r), r.uid)
        confirmation = Delivered(uids=[paired.uid, confirmed_late.uid])
        await publish(running, envelopes.encode(confirmation), "delivered-1")
        for r in (closed, paired):
            await publish(running, envelopes.encode(r), f"copy-{r.uid}")
        await wait_drained(running)
    # Past the confirmation time: the record never confirmed is voided (failed, cost 0).
    await age(pool, key_id, 61)
    await settle.settle_due(pool, 60, time.time())

    rows = await pool.fetch("SELECT * FROM usage_records WHERE key_id = $1", key_id)
    by_uid = {r["uid"]: r for r in rows}
    assert len(rows) == 6 and not any(r["awaiting_delivery"] for r in rows)
    assert (by_uid[lost.uid]["status"], by_uid[lost.uid]["cost_micros"]) == ("failed", 0)
    assert by_uid[confirmed_late.uid]["status"] == "complete"
    assert by_uid[confirmed_late.uid]["cost_micros"] > 0

    for kind, column in zip(ledger.KINDS, envelopes.TOKEN_FIELDS, strict=True):
        for m in (SONNET, HAIKU):
            for dep in (dep_a, dep_b):
                stored = sum(r[column] for r in rows if (r["model"], r["deployment"]) == (m, dep))
                labels = {"kind": kind, "model": m, "deployment": dep, "region": region}
                assert sample("ezat_billing_tokens_total", **labels) == stored, labels
    # The request/reply retry and the outbox copies were not counted again.
    input_labels = {"kind": "input", "model": SONNET, "deployment": dep_a, "region": region}
    assert sample("ezat_billing_tokens_total", **input_labels) == 1200
    output_labels = {**input_labels, "deployment": dep_b, "kind": "output"}
    assert sample("ezat_billing_tokens_total", **output_labels) == 900

    for m in (SONNET, HAIKU):
        charged = sum(r["cost_micros"] for r in rows if r["model"] == m)
        assert sample("ezat_billing_cost_micros_total", model=m, region=region) == charged
    total = sum(r["cost_micros"] for r in rows)
    assert total == sum(by_uid[r.uid]["cost_micros"] for r in (confirmed_late, closed, paired))
    assert total > 0

    after = records_by_status()
    stored_by_status = {
        key: sum(1 for r in rows if (r["status"], str(r["estimated"]).lower()) == key)
        for key in STATUSES
    }
    assert {k: after[k] - statuses_before[k] for k in STATUSES} == stored_by_status
    assert stored_by_status[("failed", "false")] == 2  # the failure and the voided record

    # Four answers on the request/reply path; five record messages stored from the outbox.
    assert sample("ezat_billing_ack_seconds_count", outcome="stored") - acks_before == 4
    assert sample("ezat_billing_outbox_store_delay_seconds_count") - delays_before == 5


async def test_a_running_billing_exports_the_price_list_it_charges_with(
    nats_url: str, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    priced = parsed(
        models=[
            model(f"anthropic/priced-{uuid.uuid4().hex[:6]}", price={"input": 2.5, "output": 12.0})
        ]
    )
    model_id = priced.models[0].id
    async with running_billing(nats_url, database_url, monkeypatch, cfg=priced) as running:
        await wait_ready(running)
        prices = {
            kind: sample("ezat_billing_price_micros_per_million_tokens", model=model_id, kind=kind)
            for kind in ("input", "output", "cache_read", "cache_write_5m", "cache_write_1h")
        }
    # The config's USD per million tokens in micro-dollars, cache prices from the input price.
    assert prices == {
        "input": 2_500_000,
        "output": 12_000_000,
        "cache_read": 250_000,
        "cache_write_5m": 3_125_000,
        "cache_write_1h": 5_000_000,
    }


@pytest.mark.parametrize(
    "reply",
    [
        "$JS.ACK.ezat_billing_outbox.billing-outbox.1.12345.12340.1733080000123456789.3",
        "$JS.ACK._.acchash.ezat_billing_outbox.billing-outbox.2.12345.12340.1733080000123456789.3.tok",
        "$JS.ACK.hub.acchash.ezat_billing_outbox.billing-outbox.2.12345.12340.1733080000123456789.0",
    ],
    ids=["v1", "v2", "v2-domain"],
)
def test_the_store_time_read_from_an_ack_subject_is_nats_pys(reply: str) -> None:
    expected = Msg(None, subject="s", reply=reply, data=b"").metadata.timestamp.timestamp()  # type: ignore[arg-type]
    assert drain.stored_at(reply) == pytest.approx(expected, abs=1e-6)
