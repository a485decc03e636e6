"""The request log's pure parts (core/request_log.py): which requests have an entry, what an
entry takes from a usage record and an error, its log line's fields, and the parameters and
query of ``GET /admin/v1/requests``."""

from __future__ import annotations

import datetime

import msgspec
import pytest
from ezat_common import envelopes
from ezat_common.envelopes import ReplyError, UsageRecord
from ezat_common.errors import GatewayError
from ezat_common.prices import Prices
from ezat_edge.core.request_log import (
    CLIENT_CLOSED,
    COLUMNS,
    REASON_CHARS,
    AnonymousSampler,
    Entry,
    RequestsQuery,
    api_of,
    log_line,
    log_lines,
    row,
    to_page,
    to_query,
    to_sql,
)


@pytest.mark.parametrize(
    ("path", "api"),
    [
        ("/v1/messages", "messages"),
        ("/v1/messages/count_tokens", "count_tokens"),
        ("/openai/v1/chat/completions", "chat"),
        ("/openai/v1/responses", "responses"),
        ("/openai/v1/responses/resp_1", "stored_responses"),
        ("/v1/models", "models"),
        ("/openai/v1/models", "models"),
        ("/api/usage", "usage"),
        ("/v1/nothing-here", "other"),
        ("/healthz", None),
        ("/metrics", None),
        ("/admin/v1/keys", None),
        ("/api/status", None),
        ("/", None),
    ],
)
def test_which_requests_have_an_entry(path: str, api: str | None) -> None:
    assert api_of(path) == api


def entry(**kw: object) -> Entry:
    return Entry(at=1_000_000.0, started=10.0, request_id="req_1", api="messages", **kw)  # type: ignore[arg-type]


def test_an_answered_request_takes_its_tokens_cost_and_model_from_its_record() -> None:
    e = entry()
    record = UsageRecord(
        request_id="req_1",
        key_id="key_0123456789abcdef",
        model="anthropic/claude-sonnet-5-5",
        api="messages",
        stream=True,
        status="complete",
        deployment="sonnet-a",
        input_tokens=100,
        cache_read_tokens=20,
        output_tokens=50,
        prices=Prices(
            input=3_000_000,
            output=15_000_000,
            cache_write_5m=0,
            cache_write_1h=0,
            cache_read=300_000,
        ),
    )
    e.usage = envelopes.encode(record)
    e.first_token = 10.25
    e.ended(200, 11.5)
    e.resolve()
    assert (e.model, e.stream, e.input_tokens, e.output_tokens) == (
        "anthropic/claude-sonnet-5-5",
        True,
        120,
        50,
    )
    # 100 x 3 + 20 x 0.3 + 50 x 15 micro-dollars
    assert e.cost_micros == 300 + 6 + 750
    assert e.upstream_status == 200
    assert (e.latency_ms, e.ttft_ms) == (1500.0, 250.0)
    assert e.error_type is None and e.usage == b""


def test_an_undecodable_record_leaves_the_counts_empty() -> None:
    e = entry()
    e.usage = b"\x93not a record"
    e.resolve()
    assert (e.input_tokens, e.output_tokens, e.cost_micros) == (0, 0, 0)


@pytest.mark.parametrize(
    ("err", "status", "want"),
    [
        # An upstream's 500 behind the gateway's 500.
        (
            ReplyError(
                status=500, type="api_error", message="deployment failed", upstream_status=500
            ),
            500,
            ("api_error", "deployment failed", 500),
        ),
        # The edge's own refusal: no upstream.
        (
            GatewayError(401, "invalid API key", type="authentication_error").reply,
            401,
            ("authentication_error", "invalid API key", None),
        ),
        (ReplyError(status=529, type="overloaded_error", message="x" * 1000), 529, None),
        # A deployment's own 4xx message (it may quote the prompt): the gateway's words.
        (
            ReplyError(
                status=400,
                type="invalid_request_error",
                message="bad: 'the prompt'",
                upstream_status=400,
                relayed=True,
            ),
            400,
            (
                "invalid_request_error",
                "the deployment rejected the request (HTTP 400, invalid_request_error)",
                400,
            ),
        ),
        # A deployment's stream error event: no upstream status beyond its 200.
        (
            ReplyError(status=400, type="invalid_request_error", message="p", relayed=True),
            400,
            (
                "invalid_request_error",
                "the deployment's answer ended with an error event "
                "(invalid_request_error, HTTP 400)",
                None,
            ),
        ),
    ],
)
def test_an_error_names_its_type_reason_and_upstream_status(
    err: ReplyError, status: int, want: tuple[str, str, int | None] | None
) -> None:
    e = entry()
    e.failed(err)
    e.ended(status, 10.1)
    if want is None:
        assert e.error_reason == "x" * REASON_CHARS and e.upstream_status is None
    else:
        assert (e.error_type, e.error_reason, e.upstream_status) == want


def test_a_client_that_left_and_an_unnamed_error_have_a_type() -> None:
    gone, failed = entry(), entry()
    gone.ended(CLIENT_CLOSED, 11.0)
    failed.ended(404, 11.0)
    assert gone.error_type == "client_closed"
    assert failed.error_type == "error"


def test_the_log_line_and_the_row_hold_ids_and_counts_only() -> None:
    e = entry(key_id="key_0123456789abcdef", team_id="team_0123456789abcdef", cost_micros=1234)
    e.ended(200, 10.5)
    fields = msgspec.structs.asdict(log_line(e))
    assert fields["cost_usd"] == 0.001234
    assert list(fields) == [
        "request_id",
        "key_id",
        "team_id",
        "model",
        "api",
        "stream",
        "status",
        "upstream_status",
        "latency_ms",
        "ttft_ms",
        "input_tokens",
        "output_tokens",
        "cost_usd",
        "error_type",
        "error_reason",
    ]
    lines = log_lines([e, e]).splitlines()  # one object a line
    assert [msgspec.json.decode(line) for line in lines] == [fields, fields]
    stored = dict(zip(COLUMNS, row(e), strict=True))
    assert stored["at"] == datetime.datetime.fromtimestamp(1_000_000.0, datetime.UTC)
    assert stored["cost_micros"] == 1234 and stored["request_id"] == "req_1"


@pytest.mark.parametrize(
    ("params", "want"),
    [
        ({}, RequestsQuery()),
        ({"request_id": "req_abc:1"}, RequestsQuery(request_id="req_abc:1")),
        ({"key": "key_0123456789abcdef"}, RequestsQuery(key="key_0123456789abcdef")),
        ({"team": "team_0123456789abcdef"}, RequestsQuery(team="team_0123456789abcdef")),
        ({"model": "anthropic/x"}, RequestsQuery(model="anthropic/x")),
        ({"status": "429"}, RequestsQuery(status=429)),
        ({"status": "5xx"}, RequestsQuery(status_class=5)),
        (
            {"since": "2026-12-01T00:00:00Z"},
            RequestsQuery(since=datetime.datetime(2026, 12, 1, tzinfo=datetime.UTC)),
        ),
        ({"limit": "1000"}, RequestsQuery(limit=1000)),
        ({"limit": ""}, RequestsQuery(limit=100)),
    ],
)
def test_parameters(params: dict[str, str], want: RequestsQuery) -> None:
    assert to_query(params) == want


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"limit": "0"}, "limit"),
        ({"limit": "1001"}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"status": "42"}, "status"),
        ({"status": "6xx"}, "status"),
        ({"key": "ezat_sk_secret"}, "key"),
        ({"team": "search"}, "team"),
        ({"request_id": "a b"}, "request_id"),
        ({"since": "yesterday"}, "since"),
        ({"model": "m" * 300}, "model"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_a_bad_parameter_is_a_400_naming_it(params: dict[str, str], named: str) -> None:
    with pytest.raises(GatewayError) as info:
        to_query(params)
    assert info.value.status == 400
    assert info.value.reply.message.startswith(f"{named}: ")
    assert "ezat_sk_secret" not in info.value.reply.message


def test_the_query_filters_newest_first_one_more_than_the_limit() -> None:
    sql, args = to_sql(to_query({"key": "key_0123456789abcdef", "status": "4xx", "limit": "5"}))
    assert "WHERE key_id = $1 AND status >= $2 AND status < $2 + 100" in sql
    assert sql.endswith("ORDER BY at DESC, id DESC LIMIT $3")
    assert args == ["key_0123456789abcdef", 400, 6]
    sql, args = to_sql(to_query({}))
    assert "WHERE" not in sql and args == [101]


def test_the_page_says_whether_there_is_more() -> None:
    at = datetime.datetime(2026, 12, 5, 12, 0, 0, 123000, tzinfo=datetime.UTC)
    stored = dict(zip(COLUMNS, row(entry()), strict=True))
    rows = [{**stored, "at": at, "cost_micros": 2_500_000}] * 3
    page = to_page(rows, 2)
    assert page["has_more"] is True and len(page["data"]) == 2
    first = page["data"][0]
    assert first["at"] == "2026-12-05T12:00:00.123Z"
    assert first["cost_usd"] == 2.5 and "cost_micros" not in first
    assert to_page(rows, 3)["has_more"] is False


def test_entries_without_a_key_are_sampled_per_second_and_with_one_never() -> None:
    sampler = AnonymousSampler(per_second=2)
    seen = [
        sampler.keep(key, now)
        for key, now in [
            ("", 10.0),
            ("", 10.5),
            ("", 10.9),  # a third in second 10: not stored
            ("key_0123456789abcdef", 10.9),  # a key: always
            ("", 11.0),  # a new second
        ]
    ]
    assert seen == [True, True, False, True, True]
    assert sampler.take_skipped() == 1 and sampler.take_skipped() == 0
