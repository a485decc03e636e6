"""Issue 16's fields of the usage record (deployment_kind, server-tool requests) decode from an
older router's records too, which a rolling upgrade leaves in the usage outbox (docs/billing.md,
"Deployment prices" and "Server tools")."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
import pytest
from ezat_common import envelopes

# An older router's record, built as a plain map as another producer's encoder sends it.
OLD = {
    "t": "usage",
    "request_id": "req-1",
    "key_id": "k",
    "model": "m",
    "api": "messages",
    "stream": True,
    "status": "complete",
    "input_tokens": 10,
}
DECODERS: list[Callable[[bytes], Any]] = [envelopes.decode_usage_record, envelopes.decode_outbox]


@pytest.mark.parametrize("decode", DECODERS, ids=lambda d: d.__name__)
@pytest.mark.parametrize(
    ("deployment", "kind"),
    [("sonnet-a", "anthropic"), ("", "")],
    ids=["served: routers before kinds had only anthropic", "served by none: no kind"],
)
def test_an_old_record_decodes_with_its_kind_and_no_server_tools(
    decode: Callable[[bytes], Any], deployment: str, kind: str
) -> None:
    record = decode(msgspec.msgpack.encode({**OLD, "deployment": deployment}))
    assert (record.deployment_kind, record.web_search_requests, record.web_fetch_requests) == (
        kind,
        0,
        0,
    )
    assert record.input_tokens == 10


def test_the_new_fields_round_trip() -> None:
    record = envelopes.decode_usage_record(
        msgspec.msgpack.encode(
            {
                **OLD,
                "deployment": "sonnet-eu",
                "deployment_kind": "bedrock",
                "web_search_requests": 3,
                "web_fetch_requests": 2,
            }
        )
    )
    again = envelopes.decode_usage_record(envelopes.encode(record))
    assert (again.deployment_kind, again.web_search_requests, again.web_fetch_requests) == (
        "bedrock",
        3,
        2,
    )


def test_server_tool_fields_are_the_records_and_the_pages() -> None:
    """Billing copies them by name into the row, the page's items and its totals."""
    from ezat_common.envelopes import SERVER_TOOL_FIELDS, UsageRecord
    from ezat_common.usage_page import UsageItem, UsageTotals
    from msgspec import structs

    record = [f.name for f in structs.fields(UsageRecord) if f.name.endswith("_requests")]
    assert tuple(record) == SERVER_TOOL_FIELDS
    for page_struct in (UsageItem, UsageTotals):
        assert set(SERVER_TOOL_FIELDS) <= {f.name for f in structs.fields(page_struct)}
