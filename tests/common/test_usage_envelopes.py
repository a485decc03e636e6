"""The usage query's reply (billing -> edge): a tagged ``UsagePage | UsageError`` whose page, as
JSON, is the public ``GET /api/usage`` body."""

from __future__ import annotations

import msgspec
import pytest
from ezat_common import envelopes, usage_page
from ezat_common.usage_page import DayTotal, UsageError, UsageItem, UsagePage, UsageTotals

ITEM = UsageItem(
    request_id="req_1",
    model="anthropic/claude-sonnet-5-5",
    api="messages",
    stream=True,
    status="complete",
    deployment="sim",
    region="eu",
    input_tokens=10,
    cache_read_tokens=0,
    cache_write_5m_tokens=0,
    cache_write_1h_tokens=0,
    output_tokens=5,
    reasoning_tokens=1,
    estimated=False,
    cost_micros=4_500,
    cost_usd=0.0045,
    received_at="2025-01-02T03:04:05.678Z",
    ttft_ms=12.5,
    total_ms=None,
)
PAGE = UsagePage(
    data=[ITEM],
    totals=UsageTotals(requests=1, input_tokens=10, cost_micros=4_500, cost_usd=0.0045),
    by_day=[
        DayTotal(
            day="2025-01-02",
            model=ITEM.model,
            requests=1,
            input_tokens=10,
            output_tokens=5,
            cost_micros=4_500,
        )
    ],
    has_more=True,
    next_cursor="abc",
)


def test_page_and_error_round_trip_as_themselves() -> None:
    assert usage_page.decode_usage_reply(envelopes.encode(PAGE)) == PAGE
    error = UsageError(error="cursor: not a cursor this API returned")
    assert usage_page.decode_usage_reply(envelopes.encode(error)) == error


def test_public_json_is_the_page_with_object_list_first() -> None:
    decoded = usage_page.decode_usage_reply(envelopes.encode(PAGE))
    assert isinstance(decoded, UsagePage)
    body = usage_page.usage_page_json(decoded)
    assert body.startswith(b'{"object":"list","data":[{"request_id":"req_1",')
    assert list(msgspec.json.decode(body)) == [
        "object",
        "data",
        "totals",
        "by_day",
        "has_more",
        "next_cursor",
    ]
    # The round trip over NATS changes no byte of what the client gets.
    assert body == usage_page.usage_page_json(PAGE)


def test_a_page_holds_one_to_a_thousand_records() -> None:
    # The edge refuses outside this range, billing clamps to it: one range for both.
    assert (usage_page.MIN_LIMIT, usage_page.MAX_LIMIT) == (1, 1000)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2025-01-01T00:00:00Z", 1735689600.0),
        ("2025-01-01T01:00:00+01:00", 1735689600.0),
        ("2025-01-01T00:00:00", 1735689600.0),  # no offset: UTC
        ("2025-01-01", 1735689600.0),
    ],
)
def test_a_time_is_rfc3339_with_utc_when_no_offset_is_given(text: str, expected: float) -> None:
    parsed = usage_page.parse_time(text)
    assert parsed.tzinfo is not None
    assert parsed.timestamp() == expected


@pytest.mark.parametrize("text", ["yesterday", "1735689600", ""])
def test_what_is_not_an_rfc3339_time_is_a_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        usage_page.parse_time(text)


def test_the_token_fields_are_the_records_and_the_pages() -> None:
    """TOKEN_FIELDS names every token count, in the record's field order; the page's items and
    totals carry the same names (billing copies them by name)."""
    from ezat_common.envelopes import TOKEN_FIELDS, UsageRecord
    from ezat_common.usage_page import UsageItem, UsageTotals
    from msgspec import structs

    record = [f.name for f in structs.fields(UsageRecord) if f.name.endswith("_tokens")]
    assert tuple(record) == TOKEN_FIELDS
    for page_struct in (UsageItem, UsageTotals):
        names = {f.name for f in structs.fields(page_struct)}
        assert set(TOKEN_FIELDS) <= names
