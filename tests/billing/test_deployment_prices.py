"""Issue 16 through the billing service, real NATS and PostgreSQL: a deployment with its own
price charges it, another deployment of the same model the model's; web searches are priced per
1,000; the usage rows keep the deployment, its kind and the server-tool requests; an older
router's record (without the new fields) is still priced and settled (docs/billing.md,
"Deployment prices" and "Server tools")."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import msgspec
import pytest
import pytest_asyncio
from ezat_billing import settle
from ezat_common import envelopes
from prometheus_client import REGISTRY
from support.config import SONNET, deployment, model, parsed

from .factories import record
from .test_app import Running, running_billing, wait_ready

# Sonnet at $3 / $15 per million (web search at Anthropic's default $10 per 1,000), served by a
# global Anthropic deployment at that price and a regional Bedrock one 10% dearer, whose
# searches cost $11 per 1,000.
CONFIG = parsed(
    models=[model(SONNET)],
    deployments=[
        deployment("sonnet-global", SONNET, "http://127.0.0.1:9"),
        deployment(
            "sonnet-eu",
            SONNET,
            "",
            kind="bedrock",
            region="eu-west-1",
            model_id="anthropic.claude-sonnet-5-5-v1:0",
            price={"input": 3.3, "output": 16.5, "web_search_per_1k": 11.0},
        ),
    ],
)
TOKENS = {"input_tokens": 1000, "output_tokens": 500, "cache_read_tokens": 10_000}


@pytest_asyncio.fixture
async def billing(
    nats_url: str, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Running]:
    async with running_billing(nats_url, database_url, monkeypatch, cfg=CONFIG) as running:
        await wait_ready(running)
        yield running


def searches(deployment_name: str) -> float:
    labels = {"tool": "web_search", "model": SONNET, "deployment": deployment_name, "region": "r"}
    return REGISTRY.get_sample_value("ezat_billing_server_tool_requests_total", labels) or 0.0


async def test_each_deployment_is_charged_its_own_price_searches_included(
    billing: Running, pool: asyncpg.Pool, key_id: str
) -> None:
    regional = record(
        key_id=key_id,
        deployment="sonnet-eu",
        deployment_kind="bedrock",
        region="r",
        web_search_requests=3,
        received_at=1_750_000_002.0,
        **TOKENS,
    )
    global_ = record(
        key_id=key_id,
        deployment="sonnet-global",
        deployment_kind="anthropic",
        region="r",
        web_search_requests=3,
        web_fetch_requests=2,
        received_at=1_750_000_001.0,
        **TOKENS,
    )
    before = searches("sonnet-eu")
    acks = [await billing.record(envelopes.encode(r)) for r in (regional, global_)]
    # Regional: 1000 x 3.3 + 500 x 16.5 + 10,000 x 0.33 (cache read, 0.1 x its input)
    #           + 3 x 11,000 (searches) = 3,300 + 8,250 + 3,300 + 33,000.
    # Global:   1000 x 3 + 500 x 15 + 10,000 x 0.3 + 3 x 10,000 + 2 fetches x 0
    #           = 3,000 + 7,500 + 3,000 + 30,000.
    assert [(a.ok, a.cost_micros) for a in acks] == [(True, 47_850), (True, 43_500)]

    page = await billing.query(key_id=key_id)
    shown = [
        (
            d["deployment"],
            d["deployment_kind"],
            d["web_search_requests"],
            d["web_fetch_requests"],
            d["cost_micros"],
        )
        for d in page["data"]
    ]
    assert shown == [
        ("sonnet-eu", "bedrock", 3, 0, 47_850),
        ("sonnet-global", "anthropic", 3, 2, 43_500),
    ]
    # Not confirmed delivered yet: pending, totalled apart (docs/billing.md, "Pending rows").
    totals = page["totals"]
    assert (totals["pending_requests"], totals["pending_cost_micros"]) == (2, 47_850 + 43_500)

    # The row says which prices it was billed at, per-request ones included.
    billed = await pool.fetchval("SELECT prices FROM usage_records WHERE uid = $1", regional.uid)
    prices = msgspec.json.decode(billed)
    assert (prices["input"], prices["web_search_per_1k"]) == (3_300_000, 11_000_000)

    # Settled once the edge confirms delivery: the searches are counted then.
    await settle.confirm(pool, [regional.uid, global_.uid])
    assert searches("sonnet-eu") - before == 3
    totals = (await billing.query(key_id=key_id))["totals"]
    assert (totals["web_search_requests"], totals["web_fetch_requests"]) == (6, 2)
    assert totals["cost_micros"] == 47_850 + 43_500


async def test_an_old_routers_record_is_priced_and_settled(
    billing: Running, pool: asyncpg.Pool, key_id: str
) -> None:
    """A record from the outbox of a router older than issue 16: no deployment_kind, no
    server-tool fields. Priced at the model's price, kind 'anthropic', then settled."""
    old = {
        "t": "usage",
        "request_id": "req-old",
        "uid": f"{key_id}-old",
        "key_id": key_id,
        "model": SONNET,
        "api": "messages",
        "stream": True,
        "status": "complete",
        "deployment": "sonnet-global",
        "region": "r",
        "input_tokens": 1000,
        "output_tokens": 500,
        "received_at": 1_750_000_000.0,
    }
    ack = await billing.record(msgspec.msgpack.encode(old))
    assert (ack.ok, ack.cost_micros) == (True, 10_500)  # 1000 x 3 + 500 x 15
    await settle.confirm(pool, [old["uid"]])
    row = await pool.fetchrow(
        "SELECT deployment_kind, web_search_requests, web_fetch_requests, cost_micros,"
        " awaiting_delivery FROM usage_records WHERE uid = $1",
        old["uid"],
    )
    assert row is not None
    assert tuple(row) == ("anthropic", 0, 0, 10_500, False)
