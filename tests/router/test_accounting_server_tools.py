"""core.accounting: server-tool requests (``usage.server_tool_use``) the upstream reports are
carried into the usage record, from a stream and from a non-streamed body, never dropped
(docs/billing.md, "Server tools")."""

from __future__ import annotations

import msgspec
import pytest
from ezat_common.envelopes import UsageRecord
from ezat_common.schemas.anthropic import AnyEvent
from ezat_router.core.accounting import UsageAccumulator
from ezat_router.core.payload import read_response

from .test_accounting import ev, start

BASE = UsageRecord(
    request_id="r1", key_id="k1", model="m", api="messages", stream=True, status="complete"
)


def tools(search: int | None = None, fetch: int | None = None) -> dict[str, int]:
    said = {"web_search_requests": search, "web_fetch_requests": fetch}
    return {k: v for k, v in said.items() if v is not None}


def message_delta(**usage: object) -> AnyEvent:
    return ev({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": usage})


def counts(record: UsageRecord) -> tuple[int, int]:
    return record.web_search_requests, record.web_fetch_requests


def test_a_stream_reports_its_searches_and_fetches_in_message_delta() -> None:
    acc = UsageAccumulator()
    acc.feed(start(input_tokens=10, output_tokens=1, server_tool_use=tools(0, 0)))
    acc.feed(message_delta(output_tokens=20, server_tool_use=tools(search=3, fetch=2)))
    record = acc.record(BASE, "complete")
    assert counts(record) == (3, 2)
    assert (record.input_tokens, record.output_tokens, record.estimated) == (10, 20, False)


def test_a_later_usage_that_omits_one_tool_keeps_the_earlier_count() -> None:
    acc = UsageAccumulator()
    acc.feed(start(input_tokens=10, server_tool_use=tools(search=1, fetch=4)))
    acc.feed(message_delta(output_tokens=5, server_tool_use=tools(search=2)))
    assert counts(acc.record(BASE, "complete")) == (2, 4)


def test_a_stream_cut_before_message_delta_keeps_what_message_start_said() -> None:
    acc = UsageAccumulator()
    acc.feed(start(input_tokens=10, server_tool_use=tools(search=1)))
    assert counts(acc.record(BASE, "client_closed")) == (1, 0)


def test_a_non_streamed_body_reports_them_in_its_usage() -> None:
    body = {
        "id": "msg_1",
        "type": "message",
        "content": [{"type": "text", "text": "found it"}],
        "stop_reason": "end_turn",
        "usage": {
            "input_tokens": 1200,
            "output_tokens": 80,
            "server_tool_use": {"web_search_requests": 4, "web_fetch_requests": 1},
        },
    }
    document, usage, content = read_response(msgspec.json.encode(body))
    acc = UsageAccumulator()
    acc.feed_response(usage, content, document.get("stop_reason"))
    record = acc.record(BASE, "complete")
    assert counts(record) == (4, 1)
    assert (record.input_tokens, record.output_tokens) == (1200, 80)


@pytest.mark.parametrize(
    "usage",
    [{"input_tokens": 5, "output_tokens": 1}, {"input_tokens": 5, "server_tool_use": None}],
    ids=["absent", "null"],
)
def test_no_server_tool_use_is_zero_requests(usage: dict[str, object]) -> None:
    acc = UsageAccumulator()
    acc.feed(start(**usage))
    acc.feed(message_delta(output_tokens=3))
    assert counts(acc.record(BASE, "complete")) == (0, 0)
