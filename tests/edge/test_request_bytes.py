"""What the edge refuses of a request's bytes, through a real edge (its ``serve()``) on the
session's NATS, PostgreSQL and Redis, with raw sockets sending the bytes (docs/api.md, "Request
bytes"; docs/observability.md, "Traces"): a header it reads that it cannot decode is a 400
naming it on every endpoint; a body that is not UTF-8 is a 400 with the offset of its first bad
byte on every endpoint that takes one; a ``traceparent`` is passed on to NATS only validated
and re-written as version 00, a ``tracestate`` never."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import AsyncIterator

import aiohttp
import pytest
from ezat_edge.app import ROUTES
from ezat_edge.core.inputs import ASCII_HEADERS, READ_HEADERS
from ezat_edge.core.routes import MODEL_CALLS, api_format

from .harness import RunningEdge, raw, read_response, running_edge

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"
GOOD = f"00-{TRACE}-{SPAN}-01"
BODY = (
    b'{"model": "claude-sonnet-5-5", "max_tokens": 5,'
    b' "messages": [{"role": "user", "content": "x"}]}'
)


@pytest.fixture(scope="module")
async def edge(nats_url: str, database_url: str, redis_url: str) -> AsyncIterator[RunningEdge]:
    async with running_edge(nats_url, database_url, redis_url) as running:
        yield running


def concrete(path: str) -> str:
    path = path.replace("{team_id}", "team_0123456789abcdef")
    return path.replace("{response_id}", "resp_0123456789abcdef").replace("{key_id}", "key_0")


async def exchange(edge: RunningEdge, head: bytes, body: bytes = b"") -> tuple[int, bytes]:
    reader, writer = await raw(edge.port)
    try:
        writer.write(head + b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        status, _, answer = await read_response(reader)
    finally:
        writer.close()
    return status, answer


def undecodable(header: str, key: str) -> bytes:
    """A header line of ``header`` holding bytes that are not UTF-8, with ``key`` alongside."""
    if header == "x-api-key":
        return b"x-api-key: ezat_sk_\xff\xfe" + b"A" * 30 + b"\r\n"
    if header == "authorization":
        return b"authorization: Bearer ezat_sk_\xc3" + b"A" * 30 + b"\r\n"
    bad = b"a\xffb"
    if header == "traceparent":  # a later version: once passed on unread, then a 500
        bad = f"01-{TRACE}-{SPAN}-01-".encode() + b"\xff\xfe"
    return b"x-api-key: " + key.encode() + b"\r\n" + header.encode() + b": " + bad + b"\r\n"


# ---- headers x endpoints ------------------------------------------------------------------


def test_the_table_covers_every_header_the_edge_reads() -> None:
    # grep services/edge for request.headers / headers.get: these are all it reads.
    assert {
        "x-api-key",
        "authorization",
        "x-ezat-cache",
        "anthropic-beta",
        "x-ezat-actor",
        "x-request-id",
        "traceparent",
        "tracestate",
        "x-ezat-session",
        "accept",
    } == READ_HEADERS


@pytest.mark.parametrize("header", sorted(READ_HEADERS))
@pytest.mark.parametrize(("method", "path"), [(m, concrete(p)) for m, p, _ in ROUTES])
async def test_an_undecodable_header_is_a_400_naming_it_on_every_endpoint(
    edge: RunningEdge, header: str, method: str, path: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    before = len(edge.translator.received)
    head = f"{method} {path} HTTP/1.1\r\nHost: x\r\n".encode() + undecodable(header, edge.key)
    status, answer = await exchange(edge, head, BODY if method == "POST" else b"")
    assert status == 400, answer
    message = json.loads(answer)["error"]["message"]
    rule = "must contain only ASCII characters" if header in ASCII_HEADERS else "is not valid UTF-8"
    assert message == f"{header}: header {rule}"
    assert len(edge.translator.received) == before  # nothing went on
    assert "Traceback" not in caplog.text


def test_the_model_calls_are_every_post_route() -> None:
    posts = {path for method, path, _ in ROUTES if method == "POST"}
    operators = ("/admin/", "/console/")  # the admin API and the console's sign-in
    assert {p for p in posts if not p.startswith(operators)} == MODEL_CALLS


async def answered_4xx(edge: RunningEdge, api: str) -> float:
    """ezat_edge_requests_total{api, status="4xx"} as the edge's /metrics says."""
    async with aiohttp.ClientSession() as http, http.get(f"{edge.url}/metrics") as resp:
        text = await resp.text()
    line = f'ezat_edge_requests_total{{api="{api}",status="4xx"}} '
    found = [row for row in text.splitlines() if row.startswith(line)]
    return float(found[0].split()[1]) if found else 0.0


@pytest.mark.parametrize("path", sorted(MODEL_CALLS))
async def test_a_model_call_refused_for_its_header_is_counted(edge: RunningEdge, path: str) -> None:
    # docs/observability.md: every answer of a model call counts, the edge's refusals included.
    api = api_format(path)
    before = await answered_4xx(edge, api)
    head = f"POST {path} HTTP/1.1\r\nHost: x\r\n".encode() + undecodable("accept", edge.key)
    status, _ = await exchange(edge, head, BODY)
    assert status == 400
    assert await answered_4xx(edge, api) == before + 1


# ---- traceparent / tracestate -------------------------------------------------------------


async def sent_on(edge: RunningEdge, headers: dict[str, str]) -> dict[str, str]:
    """The NATS headers of a model call made with ``headers``; it must succeed."""
    rid = f"bytes-{uuid.uuid4().hex}"
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            f"{edge.url}/v1/messages",
            data=BODY,
            headers={"x-api-key": edge.key, "x-request-id": rid, **headers},
        ) as resp,
    ):
        assert resp.status == 200, await resp.text()
    return edge.translator.headers[rid]


@pytest.mark.parametrize(
    ("traceparent", "passed_on"),
    [
        (GOOD, GOOD),
        (f"01-{TRACE}-{SPAN}-01-what\tever,x=<y>", GOOD),  # version 01: its first four fields
        (f"01-{TRACE}-{SPAN}-01junk", None),
        (f"00-{'0' * 32}-{SPAN}-01", None),
        (f"00-{TRACE}-{'0' * 16}-01", None),
        (f"00-{TRACE.upper()}-{SPAN}-01", None),
        (GOOD + "-" + "x" * 4096, None),  # too long for version 00
        ("not a trace", None),
    ],
    ids=["valid", "v01-junk", "v01-no-dash", "zero-trace", "zero-span", "upper", "long", "junk"],
)
async def test_a_traceparent_reaches_nats_only_validated(
    edge: RunningEdge, traceparent: str, passed_on: str | None
) -> None:
    sent = await sent_on(edge, {"traceparent": traceparent})
    assert sent.get("traceparent") == passed_on


@pytest.mark.parametrize(
    "tracestate",
    ["vendor=value", "Vendor=x", ",".join(f"k{i}=v" for i in range(40)), "a=" + "x" * 600],
    ids=["valid", "upper-key", "41-members", "too-long"],
)
async def test_a_tracestate_is_never_passed_on(edge: RunningEdge, tracestate: str) -> None:
    sent = await sent_on(edge, {"traceparent": GOOD, "tracestate": tracestate})
    assert sent.get("traceparent") == GOOD
    assert "tracestate" not in sent


# ---- bodies that are not UTF-8 ------------------------------------------------------------

BODY_ENDPOINTS = [
    "/v1/messages",
    "/v1/messages/count_tokens",
    "/openai/v1/chat/completions",
    "/openai/v1/responses",
]
# Where the bad bytes sit, in bodies otherwise valid for every endpoint (the edge decides before
# any field is read).
BAD_BODIES = {
    "top-level-field": b'{"model": "claude\xff", "max_tokens": 5, "input": "x",'
    b' "messages": [{"role": "user", "content": "x"}]}',
    "nested-ignored-field": b'{"model": "claude-sonnet-5-5", "max_tokens": 5, "input": "x",'
    b' "metadata": {"user_id": "u\xc3("}, "messages": [{"role": "user", "content": "x"}]}',
    "unknown-field": b'{"model": "claude-sonnet-5-5", "max_tokens": 5, "input": "x",'
    b' "x_unknown": {"a": ["\xed\xa0\x80"]}, "messages": [{"role": "user", "content": "x"}]}',
    "message-text": b'{"model": "claude-sonnet-5-5", "max_tokens": 5, "input": "x",'
    b' "messages": [{"role": "user", "content": "caf\xe9 \xc0\xaf"}]}',
}


def first_bad_byte(body: bytes) -> int:
    try:
        body.decode()
    except UnicodeDecodeError as exc:
        return exc.start
    raise AssertionError("the body is valid UTF-8")


@pytest.mark.parametrize("where", sorted(BAD_BODIES))
@pytest.mark.parametrize("path", BODY_ENDPOINTS)
async def test_a_body_that_is_not_utf8_is_a_400_with_its_offset(
    edge: RunningEdge, path: str, where: str
) -> None:
    body = BAD_BODIES[where]
    before = len(edge.translator.received)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: x\r\nx-api-key: {edge.key}\r\n"
        "content-type: application/json\r\n"
    ).encode()
    status, answer = await exchange(edge, head, body)
    assert status == 400, answer
    error = json.loads(answer)["error"]
    assert error["type"] == "invalid_request_error"
    assert error["message"] == (
        f"the request body is not valid UTF-8 (invalid byte at offset {first_bad_byte(body)});"
        " send JSON encoded as UTF-8"
    )
    assert len(edge.translator.received) == before


@pytest.mark.parametrize("path", BODY_ENDPOINTS)
async def test_a_body_in_utf8_beyond_ascii_is_passed_on(edge: RunningEdge, path: str) -> None:
    body = json.dumps(
        {
            "model": "claude-sonnet-5-5",
            "max_tokens": 5,
            "input": "x",
            "messages": [{"role": "user", "content": "café 😀 日本"}],
        },
        ensure_ascii=False,
    ).encode()
    headers = {"x-api-key": edge.key}
    async with (
        aiohttp.ClientSession() as http,
        http.post(edge.url + path, data=body, headers=headers) as resp,
    ):
        assert resp.status == 200, await resp.text()
