"""middleware.py through aiohttp's test server: each kind of failure a handler raises becomes an
error in the format of the API the client called, with the request id and the edge's headers."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Mapping

import pytest
import pytest_asyncio
from aiohttp import http_exceptions, web
from aiohttp.test_utils import TestClient, TestServer
from aiohttp.web_protocol import RequestPayloadError
from ezat_common import logs
from ezat_common.errors import GatewayError
from ezat_edge.middleware import errors_mw, on_prepare
from ezat_edge.protocol import RID, SERVER

RID_IN = "req_from_client"


def raising(exc: BaseException) -> Callable[[web.Request], object]:
    async def handler(request: web.Request) -> web.StreamResponse:
        raise exc

    return handler


RAISED: dict[str, BaseException] = {
    "rate": GatewayError(429, "slow down", retry_after=2.5, headers={"x-ratelimit-limit": "1"}),
    "bad": GatewayError(400, "model: is required", param="model"),
    "slow_body": GatewayError(408, "request body: took too long"),
    "incomplete": asyncio.IncompleteReadError(b"ab", 10),
    "payload": RequestPayloadError("bad chunk"),
    "framing": http_exceptions.BadHttpMessage("bad framing"),
    "bug": ZeroDivisionError("division by zero"),
    "teapot": web.HTTPTooManyRequests(reason="not ours"),
    "moved": web.HTTPFound("/elsewhere"),
}


async def seen(request: web.Request) -> web.StreamResponse:
    """What a handler sees of the middleware: the request id, on the request and in the logs."""
    return web.json_response({"rid": request[RID], "logged": logs.request_id.get()})


def app() -> web.Application:
    application = web.Application(middlewares=[errors_mw])
    application.on_response_prepare.append(on_prepare)
    for prefix in ("/v1", "/openai/v1"):
        for name, exc in RAISED.items():
            application.router.add_post(f"{prefix}/{name}", raising(exc))  # type: ignore[arg-type]
    application.router.add_get("/v1/seen", seen)
    return application


@pytest_asyncio.fixture(scope="module")
async def client() -> AsyncIterator[TestClient[web.Request, web.Application]]:
    async with TestClient(TestServer(app())) as c:
        yield c


async def post(
    client: TestClient[web.Request, web.Application], path: str
) -> tuple[int, Mapping[str, str], object]:
    async with client.post(path, headers={"x-request-id": RID_IN}) as resp:
        return resp.status, resp.headers, await resp.json()


def anthropic(type: str, message: str) -> dict[str, object]:
    return {"type": "error", "error": {"type": type, "message": message}, "request_id": RID_IN}


@pytest.mark.parametrize(
    ("name", "status", "body"),
    [
        ("rate", 429, anthropic("rate_limit_error", "slow down")),
        ("bad", 400, anthropic("invalid_request_error", "model: is required")),
        ("slow_body", 408, anthropic("invalid_request_error", "request body: took too long")),
        ("incomplete", 400, anthropic("invalid_request_error", "request body: is incomplete")),
        ("payload", 400, anthropic("invalid_request_error", "request body: is malformed")),
        ("framing", 400, anthropic("invalid_request_error", "request body: is malformed")),
        ("bug", 500, anthropic("api_error", "internal error; retry")),
        ("teapot", 429, anthropic("rate_limit_error", "not ours")),
    ],
)
async def test_each_failure_is_an_anthropic_error_under_v1(
    client: TestClient[web.Request, web.Application], name: str, status: int, body: object
) -> None:
    got_status, headers, got_body = await post(client, f"/v1/{name}")
    assert (got_status, got_body) == (status, body)
    assert headers["Content-Type"].startswith("application/json")
    assert (headers["request-id"], headers["x-request-id"]) == (RID_IN, RID_IN)
    assert headers["Server"] == SERVER


@pytest.mark.parametrize(
    ("name", "status", "error"),
    [
        ("rate", 429, ("slow down", "rate_limit_error", None)),
        ("bad", 400, ("model: is required", "invalid_request_error", "model")),
        ("incomplete", 400, ("request body: is incomplete", "invalid_request_error", None)),
        ("payload", 400, ("request body: is malformed", "invalid_request_error", None)),
        ("bug", 500, ("internal error; retry", "server_error", None)),
    ],
)
async def test_each_failure_is_an_openai_error_under_openai(
    client: TestClient[web.Request, web.Application],
    name: str,
    status: int,
    error: tuple[str, str, str | None],
) -> None:
    got_status, headers, body = await post(client, f"/openai/v1/{name}")
    assert got_status == status
    assert isinstance(body, dict) and set(body) == {"error"}
    message, kind, param = error
    assert (body["error"]["message"], body["error"]["type"]) == (message, kind)
    assert body["error"]["param"] == param
    assert headers["x-request-id"] == RID_IN


async def test_a_gateway_error_keeps_its_headers_and_retry_after(
    client: TestClient[web.Request, web.Application],
) -> None:
    for path in ("/v1/rate", "/openai/v1/rate"):
        _, headers, _ = await post(client, path)
        assert headers["retry-after"] == "3"  # whole seconds, rounded up
        assert headers["x-ratelimit-limit"] == "1"


@pytest.mark.parametrize(
    ("name", "closes"),
    [("slow_body", True), ("payload", True), ("framing", True), ("bad", False), ("bug", False)],
)
async def test_the_connection_is_closed_when_the_rest_of_the_body_may_follow(
    client: TestClient[web.Request, web.Application], name: str, closes: bool
) -> None:
    _, headers, _ = await post(client, f"/v1/{name}")
    assert (headers.get("Connection", "").lower() == "close") is closes


async def test_an_unexpected_exception_is_logged_and_never_aiohttps_text_page(
    client: TestClient[web.Request, web.Application], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="ezat.edge"):
        status, headers, _ = await post(client, "/v1/bug")
    assert status == 500 and headers["Content-Type"].startswith("application/json")
    [record] = [r for r in caplog.records if r.name == "ezat.edge"]
    assert record.getMessage() == "request failed"
    assert record.exc_info is not None and record.exc_info[0] is ZeroDivisionError


async def test_a_malformed_body_is_logged_without_its_bytes(
    client: TestClient[web.Request, web.Application], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="ezat.edge"):
        await post(client, "/v1/payload")
    [record] = [r for r in caplog.records if r.name == "ezat.edge"]
    assert record.getMessage() == "malformed request body: RequestPayloadError"


async def test_no_route_and_wrong_method_are_errors_of_the_api(
    client: TestClient[web.Request, web.Application],
) -> None:
    async with client.get("/v1/nope", headers={"x-request-id": RID_IN}) as resp:
        assert resp.status == 404
        assert await resp.json() == anthropic("not_found_error", "GET /v1/nope: no such endpoint")
    async with client.get("/openai/v1/rate") as resp:
        assert resp.status == 405
        body = await resp.json()
        assert body["error"]["message"] == "GET /openai/v1/rate: method not allowed"
        assert resp.headers["x-request-id"] == resp.headers["request-id"]


async def test_a_redirect_is_not_an_error(
    client: TestClient[web.Request, web.Application],
) -> None:
    async with client.post("/v1/moved", allow_redirects=False) as resp:
        assert resp.status == 302
        assert resp.headers["Location"] == "/elsewhere"


async def test_the_request_id_is_the_clients_when_valid_else_a_new_one(
    client: TestClient[web.Request, web.Application],
) -> None:
    async with client.get("/v1/seen", headers={"x-request-id": RID_IN}) as resp:
        assert await resp.json() == {"rid": RID_IN, "logged": RID_IN}
        assert resp.headers["request-id"] == RID_IN
    async with client.get("/v1/seen", headers={"x-request-id": "not valid!"}) as resp:
        seen_body = await resp.json()
        assert seen_body["rid"] != "not valid!" and seen_body["rid"] == seen_body["logged"]
        assert resp.headers["x-request-id"] == seen_body["rid"]
