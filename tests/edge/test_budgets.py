"""budgets.py: the month's spend from billing's typed reply, cached; billing's refusal or
silence fails open (the last known spend, else 0)."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import cast

import msgspec
import pytest
from ezat_common import bus, envelopes, kv, usage_page
from ezat_common.db import ApiKey
from ezat_common.errors import GatewayError
from ezat_common.redis_keys import RedisKeys
from ezat_common.subjects import Subjects
from ezat_common.usage_page import UsageError, UsagePage, UsageTotals
from ezat_edge.budgets import Budgets
from ezat_edge.holds import HoldStore
from prometheus_client import REGISTRY

NOW = datetime.datetime(2025, 6, 15, tzinfo=datetime.UTC).timestamp()
KEY = ApiKey(id="key_1", name="k", prefix="ezat_sk_abc", monthly_budget_micros=5_000_000)


@dataclass
class Answer:
    data: bytes


class FakeBilling:
    def __init__(self) -> None:
        self.reply: bytes | None = None  # None: no answer (a timeout)
        self.asked = 0

    def answer(self, reply: usage_page.UsageReply) -> None:
        self.reply = envelopes.encode(reply)

    async def request(self, subject: str, data: bytes, timeout: float) -> Answer:
        self.asked += 1
        query = envelopes.decode_usage_query(data)
        assert (query.key_id, query.limit) == ("key_1", 1)
        assert query.since == datetime.datetime(2025, 6, 1, tzinfo=datetime.UTC).timestamp()
        if self.reply is None:
            raise TimeoutError
        return Answer(self.reply)


def spent(micros: int) -> UsagePage:
    totals = UsageTotals(cost_micros=micros)
    return UsagePage(data=[], totals=totals, by_day=[], has_more=False, next_cursor=None)


@pytest.fixture
def billing() -> FakeBilling:
    return FakeBilling()


async def test_the_spend_is_the_pages_total_and_is_cached(billing: FakeBilling) -> None:
    budgets = Budgets(Subjects("t"), ttl=60, clock=lambda: NOW)
    nc = cast(bus.Client, billing)
    billing.answer(spent(1_000))
    assert await budgets.spent(nc, "key_1", NOW) == 1_000
    billing.answer(spent(2_000))
    assert await budgets.spent(nc, "key_1", NOW) == 1_000 and billing.asked == 1


async def test_a_key_at_its_budget_is_refused(billing: FakeBilling) -> None:
    budgets = Budgets(Subjects("t"), clock=lambda: NOW)
    billing.answer(spent(5_000_000))
    with pytest.raises(GatewayError) as caught:
        await budgets.check(cast(bus.Client, billing), KEY)
    assert caught.value.status == 403


async def test_an_error_or_no_answer_fails_open_with_the_last_known_spend(
    billing: FakeBilling,
) -> None:
    budgets = Budgets(Subjects("t"), ttl=0, clock=lambda: NOW)
    nc = cast(bus.Client, billing)
    billing.answer(UsageError(error="usage: the usage store is unavailable; retry shortly"))
    assert await budgets.spent(nc, "key_1", NOW) == 0
    billing.answer(spent(7))
    assert await budgets.spent(nc, "key_1", NOW) == 7
    billing.answer(UsageError(error="usage: the usage store is unavailable; retry shortly"))
    assert await budgets.spent(nc, "key_1", NOW) == 7
    billing.reply = None
    assert await budgets.spent(nc, "key_1", NOW) == 7


async def test_an_unreadable_answer_fails_open_with_the_last_known_spend(
    billing: FakeBilling,
) -> None:
    budgets = Budgets(Subjects("t"), ttl=0, clock=lambda: NOW)
    nc = cast(bus.Client, billing)
    billing.answer(spent(9))
    assert await budgets.spent(nc, "key_1", NOW) == 9
    labels = {"message": "usage_reply"}
    before = REGISTRY.get_sample_value("ezat_undecodable_messages_total", labels) or 0.0
    billing.reply = b"\xc1"
    assert await budgets.spent(nc, "key_1", NOW) == 9
    assert REGISTRY.get_sample_value("ezat_undecodable_messages_total", labels) == before + 1


def unreachable() -> HoldStore:
    """A hold store whose Redis refuses every connection."""
    return HoldStore(kv.connect("redis://127.0.0.1:1", timeout=0.2), RedisKeys("t"))


async def test_an_unreachable_hold_store_fails_closed_by_default(billing: FakeBilling) -> None:
    budgets = Budgets(Subjects("t"), clock=lambda: NOW, holds=unreachable())
    billing.answer(spent(0))
    labels = {"enforcement": "fail_closed"}
    before = REGISTRY.get_sample_value("ezat_edge_budget_hold_unavailable_total", labels) or 0.0
    with pytest.raises(GatewayError) as caught:
        await budgets.hold(cast(bus.Client, billing), KEY, "u1", 10, NOW + 60)
    assert (caught.value.status, caught.value.reply.type) == (503, "api_error")
    assert caught.value.reply.message.startswith("budget: this key's monthly budget cannot be")
    after = REGISTRY.get_sample_value("ezat_edge_budget_hold_unavailable_total", labels)
    assert after == before + 1


async def test_fail_open_admits_on_the_months_spend_alone(billing: FakeBilling) -> None:
    budgets = Budgets(
        Subjects("t"), clock=lambda: NOW, holds=unreachable(), enforcement="fail_open"
    )
    nc = cast(bus.Client, billing)
    billing.answer(spent(4_999_999))
    assert await budgets.hold(nc, KEY, "u1", 10_000_000, NOW + 60) == []
    # At the budget the month's spend still refuses it: the 403, not the store's 503.
    budgets = Budgets(
        Subjects("t"), clock=lambda: NOW, holds=unreachable(), enforcement="fail_open"
    )
    billing.answer(spent(5_000_000))
    with pytest.raises(GatewayError) as caught:
        await budgets.hold(nc, KEY, "u2", 1, NOW + 60)
    assert caught.value.status == 403


async def test_a_keys_own_enforcement_overrides_the_edges_default(billing: FakeBilling) -> None:
    nc = cast(bus.Client, billing)
    billing.answer(spent(0))
    labels = {"enforcement": "fail_open"}
    before = REGISTRY.get_sample_value("ezat_edge_budget_hold_unavailable_total", labels) or 0.0
    open_key = msgspec.structs.replace(KEY, budget_enforcement="fail_open")
    budgets = Budgets(Subjects("t"), clock=lambda: NOW, holds=unreachable())  # default closed
    assert await budgets.hold(nc, open_key, "u1", 10, NOW + 60) == []
    after = REGISTRY.get_sample_value("ezat_edge_budget_hold_unavailable_total", labels)
    assert after == before + 1
    closed_key = msgspec.structs.replace(KEY, budget_enforcement="fail_closed")
    budgets = Budgets(
        Subjects("t"), clock=lambda: NOW, holds=unreachable(), enforcement="fail_open"
    )
    with pytest.raises(GatewayError) as caught:
        await budgets.hold(nc, closed_key, "u2", 10, NOW + 60)
    assert caught.value.status == 503
