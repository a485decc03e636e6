"""Slow, hostile and too many clients at the edge (docs/reliability.md), from raw sockets; the
official SDKs for the paths a well-behaved client takes.

The edge runs in this process with its real ``serve()`` on the session's NATS/PostgreSQL/Redis
(tests/edge/conftest.py); short deadlines keep each test under a few seconds.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator

import anthropic
import openai
import pytest
from aiohttp.web_protocol import RequestHandler
from ezat_edge.protocol import EdgeProtocol

from .harness import RunningEdge, closed_within, raw, read_response, running_edge

HEADER_TIMEOUT = 1.0
KEEPALIVE = 1.5


@pytest.fixture(scope="module")
async def edge(nats_url: str, database_url: str, redis_url: str) -> AsyncIterator[RunningEdge]:
    async with running_edge(
        nats_url,
        database_url,
        redis_url,
        header_timeout=HEADER_TIMEOUT,
        keepalive_timeout=KEEPALIVE,
        body_timeout=1.0,
        body_min_rate=10**9,
        max_in_flight=2,
    ) as running:
        yield running


def _get(path: str, *extra: bytes) -> bytes:
    return b"GET " + path.encode() + b" HTTP/1.1\r\nHost: x\r\n" + b"".join(extra) + b"\r\n"


def _no_banner(headers: dict[str, str]) -> None:
    assert headers.get("server") == "ezat", headers
    assert "aiohttp" not in json.dumps(headers).lower()
    assert "python" not in json.dumps(headers).lower()


# ---- request heads ------------------------------------------------------------------------


async def test_a_head_never_finished_gets_408_and_is_closed(edge: RunningEdge) -> None:
    reader, writer = await raw(edge.port)
    writer.write(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: ezat_sk_")
    started = time.monotonic()
    status, headers, body = await read_response(reader, timeout=HEADER_TIMEOUT + 3)
    assert time.monotonic() - started < HEADER_TIMEOUT + 1.5
    assert status == 408
    _no_banner(headers)
    error = json.loads(body)
    assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    assert error["error"]["message"].startswith("request headers:")
    assert error["request_id"] == headers["request-id"]
    assert await closed_within(reader, 1.0)
    writer.close()


async def test_the_openai_path_gets_its_own_format(edge: RunningEdge) -> None:
    reader, writer = await raw(edge.port)
    writer.write(b"POST /openai/v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthor")
    status, _, body = await read_response(reader, timeout=HEADER_TIMEOUT + 3)
    assert status == 408
    assert json.loads(body)["error"]["code"] == "request_timeout"
    writer.close()


async def test_a_silent_connection_is_closed_without_an_answer(edge: RunningEdge) -> None:
    reader, writer = await raw(edge.port)
    started = time.monotonic()
    assert await closed_within(reader, HEADER_TIMEOUT + 1.5)
    assert time.monotonic() - started >= HEADER_TIMEOUT - 0.2
    writer.close()


async def test_a_head_in_pieces_within_the_deadline_is_served(edge: RunningEdge) -> None:
    reader, writer = await raw(edge.port)
    for piece in (b"GET /hea", b"lthz HTTP/1.1\r\n", b"Host: x\r\n", b"\r\n"):
        writer.write(piece)
        await asyncio.sleep(HEADER_TIMEOUT / 5)
    status, headers, _ = await read_response(reader)
    assert status == 200
    _no_banner(headers)
    writer.close()


async def test_kept_alive_connections_idle_out_and_their_next_head_has_a_deadline(
    edge: RunningEdge,
) -> None:
    # Idle after a response: closed after keepalive_timeout, not aiohttp's 75 s / 1 h.
    reader, writer = await raw(edge.port)
    writer.write(_get("/healthz"))
    assert (await read_response(reader))[0] == 200
    started = time.monotonic()
    assert await closed_within(reader, KEEPALIVE + 1.5)
    assert time.monotonic() - started >= KEEPALIVE - 0.3
    writer.close()
    # The next request begun on a kept-alive connection must be complete in header_timeout.
    reader, writer = await raw(edge.port)
    writer.write(_get("/healthz"))
    assert (await read_response(reader))[0] == 200
    writer.write(b"GET /healthz HTTP/1.1\r\nHo")
    status, _, _ = await read_response(reader, timeout=HEADER_TIMEOUT + 3)
    assert status == 408
    writer.close()


# ---- bodies -------------------------------------------------------------------------------


async def test_a_body_never_finished_gets_408_and_is_closed(edge: RunningEdge) -> None:
    reader, writer = await raw(edge.port)
    writer.write(
        b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: "
        + edge.key.encode()
        + b'\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{"mo'
    )
    started = time.monotonic()
    status, headers, body = await read_response(reader, timeout=5)
    assert time.monotonic() - started < 3
    assert status == 408
    assert headers.get("connection", "").lower() == "close"
    assert json.loads(body)["error"]["message"].startswith("request body:")
    # Closed after aiohttp's lingering read (10 s): tests/faults/test_edge_file_limit.py.
    writer.close()


async def test_a_body_sent_in_slow_pieces_within_the_deadline_is_served(edge: RunningEdge) -> None:
    payload = json.dumps(
        {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    ).encode()
    reader, writer = await raw(edge.port)
    writer.write(
        b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: "
        + edge.key.encode()
        + b"\r\ncontent-type: application/json\r\ncontent-length: "
        + str(len(payload)).encode()
        + b"\r\n\r\n"
    )
    half = len(payload) // 2
    # Two pauses of 0.2 s: slow pieces, with 0.6 s of the 1 s deadline to spare for a loaded
    # machine (0.3 s pauses once met a 408 in a full run: the edge runs in this test's loop).
    for piece in (payload[:half], payload[half:]):
        await asyncio.sleep(0.2)
        writer.write(piece)
    status, _, body = await read_response(reader)
    assert status == 200, body
    writer.close()


# ---- malformed heads ----------------------------------------------------------------------

SECRET = "ezat_sk_THIS-IS-A-SECRET-KEY-abcdefghijklmnopqrstuvwxyz"


@pytest.mark.parametrize("ending", [b"\n", b"\rX", b"\x00"], ids=["LF", "CR", "NUL"])
@pytest.mark.parametrize("path", ["/v1/messages", "/openai/v1/chat/completions"])
async def test_a_broken_key_line_is_answered_in_api_format_and_never_echoed_or_logged(
    edge: RunningEdge, ending: bytes, path: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    reader, writer = await raw(edge.port)
    writer.write(
        b"POST " + path.encode() + b" HTTP/1.1\r\nHost: x\r\n"
        b"x-api-key: " + SECRET.encode() + ending + b"\r\ncontent-length: 0\r\n\r\n"
    )
    status, headers, body = await read_response(reader)
    assert status == 400
    _no_banner(headers)
    assert headers["content-type"].startswith("application/json")
    assert headers["request-id"] and headers["x-request-id"] == headers["request-id"]
    error = json.loads(body)
    if path.startswith("/openai/"):
        assert error["error"]["type"] == "invalid_request_error"
        message = error["error"]["message"]
    else:
        assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
        assert error["request_id"] == headers["request-id"]
        message = error["error"]["message"]
    assert message.startswith("x-api-key: header is malformed")
    assert "THIS-IS-A-SECRET" not in body.decode() + json.dumps(headers)
    assert "THIS-IS-A-SECRET" not in caplog.text
    assert await closed_within(reader, 2)
    writer.close()


async def test_garbage_instead_of_http_is_a_json_400(edge: RunningEdge) -> None:
    reader, writer = await raw(edge.port)
    writer.write(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 40)
    status, headers, body = await read_response(reader)
    assert status == 400
    _no_banner(headers)
    assert json.loads(body)["error"]["type"] == "invalid_request_error"
    writer.close()


# ---- header bytes that are not ASCII / UTF-8 ----------------------------------------------


@pytest.mark.parametrize(
    "header", ["x-api-key", "authorization", "x-ezat-session", "x-ezat-cache", "anthropic-beta"]
)
@pytest.mark.parametrize("path", ["/v1/messages", "/openai/v1/chat/completions"])
async def test_an_undecodable_byte_in_a_header_is_a_400_naming_it(
    edge: RunningEdge, header: str, path: str, caplog: pytest.LogCaptureFixture
) -> None:
    payload = b'{"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}'
    if header == "x-api-key":
        lines = b"x-api-key: ezat_sk_\xff\xfe" + b"A" * 30 + b"\r\n"
    elif header == "authorization":
        lines = b"authorization: Bearer ezat_sk_\xc3" + b"A" * 30 + b"\r\n"
    else:
        lines = b"x-api-key: " + edge.key.encode() + b"\r\n" + header.encode() + b": a\xffb\r\n"
    reader, writer = await raw(edge.port)
    writer.write(
        b"POST "
        + path.encode()
        + b" HTTP/1.1\r\nHost: x\r\n"
        + lines
        + b"content-type: application/json\r\ncontent-length: "
        + str(len(payload)).encode()
        + b"\r\n\r\n"
        + payload
    )
    status, _, body = await read_response(reader)
    assert status == 400, body
    error = json.loads(body)["error"]
    assert error["type"] == "invalid_request_error"
    assert error["message"].startswith(f"{header}: header"), error
    assert "Traceback" not in caplog.text
    writer.close()


async def test_a_session_in_utf8_is_accepted(edge: RunningEdge) -> None:
    async with anthropic.AsyncAnthropic(
        base_url=edge.url, api_key=edge.key, max_retries=0
    ) as client:
        before = len(edge.translator.received)
        reply = await client.messages.create(
            model="claude-sonnet-5-5",
            max_tokens=5,
            messages=[{"role": "user", "content": "hi"}],
            extra_headers={"x-ezat-session": "équipe-ü"},
        )
    assert reply.content[0].text == "hi"  # type: ignore[union-attr]
    assert edge.translator.received[before].session == "équipe-ü"


# ---- overload -----------------------------------------------------------------------------


async def test_beyond_max_in_flight_the_edge_answers_overloaded_at_once(edge: RunningEdge) -> None:
    async with (
        anthropic.AsyncAnthropic(base_url=edge.url, api_key=edge.key, max_retries=0) as claude,
        openai.AsyncOpenAI(
            base_url=edge.url + "/openai/v1", api_key=edge.key, max_retries=0
        ) as gpt,
    ):
        await _refused_at_once_beyond_max_in_flight(edge, claude, gpt)


async def _refused_at_once_beyond_max_in_flight(
    edge: RunningEdge, claude: anthropic.AsyncAnthropic, gpt: openai.AsyncOpenAI
) -> None:
    """The test above, with its clients (closed by the test)."""
    args = {"model": "claude-sonnet-5-5", "max_tokens": 5}
    msgs = [{"role": "user", "content": "hi"}]
    gate = asyncio.Event()
    edge.translator.gate = gate
    try:
        held = [
            asyncio.create_task(claude.messages.create(**args, messages=msgs)),  # type: ignore[arg-type]
            asyncio.create_task(gpt.chat.completions.create(**args, messages=msgs)),  # type: ignore[arg-type]
        ]
        while edge.edge.admission.in_flight < 2:
            await asyncio.sleep(0.01)
        started = time.monotonic()
        with pytest.raises(anthropic.APIStatusError) as refused:
            await claude.messages.create(**args, messages=msgs)  # type: ignore[arg-type]
        assert refused.value.status_code == 529
        assert refused.value.response.headers["retry-after"] == "1"
        body = refused.value.response.json()
        assert body["error"]["type"] == "overloaded_error"
        with pytest.raises(openai.APIStatusError) as refused_oa:
            await gpt.chat.completions.create(**args, messages=msgs)  # type: ignore[arg-type]
        assert refused_oa.value.status_code == 503
        assert refused_oa.value.response.headers["retry-after"] == "1"
        assert time.monotonic() - started < 1.0, "refusals must not wait"
        # Health and model lists are not model requests: they still answer.
        assert len((await claude.models.list()).data) >= 0
    finally:
        gate.set()
        edge.translator.gate = None
    first, second = await asyncio.gather(*held)
    assert first.content[0].text == "hi"  # type: ignore[union-attr]
    assert second.choices[0].message.content == "hi"  # type: ignore[union-attr]
    assert edge.edge.admission.in_flight == 0
    again = await claude.messages.create(**args, messages=msgs)  # type: ignore[arg-type]
    assert again.content[0].text == "hi"  # type: ignore[union-attr]


# ---- the connection cap -------------------------------------------------------------------


async def test_beyond_max_connections_new_ones_are_refused_and_old_ones_keep_working(
    nats_url: str, database_url: str, redis_url: str
) -> None:
    async with running_edge(
        nats_url, database_url, redis_url, header_timeout=1.0, max_connections=6
    ) as capped:
        old_r, old_w = await raw(capped.port)
        old_w.write(_get("/healthz"))
        assert (await read_response(old_r))[0] == 200
        idle = [await raw(capped.port) for _ in range(5)]
        for _, w in idle:
            w.write(b"GET /healthz HTTP/1.1\r\n")  # never finished
        await asyncio.sleep(0.1)
        r, w = await raw(capped.port)
        started = time.monotonic()
        status, headers, body = await read_response(r)
        assert status == 503
        assert headers["retry-after"] == "1"
        _no_banner(headers)
        assert json.loads(body)["error"]["type"] == "overloaded_error"
        assert await closed_within(r, 1.0)
        assert time.monotonic() - started < 1.0
        w.close()
        # The connection opened before the flood still works.
        old_w.write(_get("/healthz"))
        assert (await read_response(old_r))[0] == 200
        # Once the hostile ones time out, fresh connections are served again.
        for reader, _ in idle:
            assert await closed_within(reader, 3.0)
        r, w = await raw(capped.port)
        w.write(_get("/healthz"))
        assert (await read_response(r))[0] == 200
        w.close()
        old_w.close()
        for _, writer in idle:
            writer.close()


def test_the_aiohttp_internals_the_protocol_relies_on_are_there() -> None:
    """EdgeProtocol reads these attributes of aiohttp's RequestHandler (protocol.py)."""
    slots = set(RequestHandler.__slots__)
    assert {"_request_count", "_waiter", "_messages", "_manager", "_keepalive_timeout"} <= slots
    assert issubclass(EdgeProtocol, RequestHandler)


async def test_a_broken_chunked_body_is_a_json_400(
    edge: RunningEdge, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    reader, writer = await raw(edge.port)
    writer.write(
        b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: "
        + edge.key.encode()
        + b'\r\ntransfer-encoding: chunked\r\n\r\n5\r\n{"mo"\r\nZZ-not-a-size\r\n\r\n'
    )
    status, headers, body = await read_response(reader)
    assert status == 400, body
    _no_banner(headers)
    error = json.loads(body)["error"]
    assert error["type"] == "invalid_request_error"
    assert error["message"].startswith("request body: its framing"), error
    assert "Traceback" not in caplog.text
    writer.close()
