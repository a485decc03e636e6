"""usage.py: billing's typed reply to the edge's usage query becomes the HTTP answer (JSON as
billing built it, CSV, or the 400 of a refused parameter), without NATS."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import msgspec
import pytest
from aiohttp.test_utils import make_mocked_request
from ezat_common import bus, envelopes, usage_page
from ezat_common.db import ApiKey
from ezat_common.envelopes import UsageQuery
from ezat_common.errors import GatewayError
from ezat_common.subjects import Subjects
from ezat_common.usage_page import UsageError, UsagePage, UsageTotals
from ezat_edge.usage import usage_query

from .core.test_usage import item

KEY = ApiKey(id="key_1", name="k", prefix="ezat_sk_abc")
SUBJECTS = Subjects("t")
PAGE = UsagePage(
    data=[item(request_id="r1", cost_usd=0.0045)],
    totals=UsageTotals(requests=1),
    by_day=[],
    has_more=True,
    next_cursor="next",
)


@dataclass
class Answer:
    data: bytes


@dataclass
class FakeBilling:
    """Answers every usage query with ``reply``; remembers the queries."""

    reply: bytes
    queries: list[UsageQuery] = field(default_factory=list)

    async def request(self, subject: str, data: bytes, timeout: float) -> Answer:
        assert subject == SUBJECTS.usage_query
        self.queries.append(envelopes.decode_usage_query(data))
        return Answer(self.reply)


async def ask(reply: usage_page.UsageReply, path: str = "/api/usage", **headers: str) -> Any:
    billing = FakeBilling(envelopes.encode(reply))
    request = make_mocked_request("GET", path, headers=headers)
    resp = await usage_query(cast(bus.Client, billing), SUBJECTS, KEY, request)
    return resp, billing.queries


async def test_the_page_is_answered_as_json_byte_for_byte() -> None:
    resp, [query] = await ask(PAGE, "/api/usage?limit=5&model=m")
    assert resp.content_type == "application/json"
    assert resp.body == usage_page.usage_page_json(PAGE)
    assert msgspec.json.decode(resp.body)["object"] == "list"
    assert (query.key_id, query.limit, query.model, query.fresh) == ("key_1", 5, "m", True)


async def test_csv_carries_the_next_cursor_in_a_header() -> None:
    resp, _ = await ask(PAGE, accept="text/csv")
    assert resp.content_type == "text/csv" and resp.headers["x-next-cursor"] == "next"
    lines = resp.body.decode().splitlines()
    assert lines[0].startswith("request_id,received_at,") and lines[1].startswith("r1,")


async def test_a_refusal_is_the_400_naming_its_parameter() -> None:
    with pytest.raises(GatewayError) as caught:
        await ask(UsageError(error="cursor: not a cursor this API returned"))
    err = caught.value
    assert (err.status, err.param, err.message) == (
        400,
        "cursor",
        "cursor: not a cursor this API returned",
    )


async def test_a_reply_the_edge_cannot_read_is_a_retryable_503_and_is_counted() -> None:
    from prometheus_client import REGISTRY

    def unreadable() -> float:
        labels = {"message": "usage_reply"}
        return REGISTRY.get_sample_value("ezat_undecodable_messages_total", labels) or 0.0

    before = unreadable()
    billing = FakeBilling(b'{"error": "json, not the envelope"}')
    request = make_mocked_request("GET", "/api/usage")
    with pytest.raises(GatewayError) as caught:
        await usage_query(cast(bus.Client, billing), SUBJECTS, KEY, request)
    err = caught.value
    assert (err.status, err.message, err.retry_after) == (
        503,
        "usage is unavailable right now; retry shortly",
        2,
    )
    assert unreadable() == before + 1
