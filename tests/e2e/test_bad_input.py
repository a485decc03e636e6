"""Bad input gets a clear 4xx naming the field, in Anthropic's error body, with the request id."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from .conftest import Gateway

MODEL = "anthropic/claude-sonnet-5-5"
OK_MESSAGES = [{"role": "user", "content": "hi"}]


async def post(
    http: aiohttp.ClientSession,
    gateway: Gateway,
    path: str,
    data: bytes | None = None,
    json: Any = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, Any], Any]:
    h = {"x-api-key": gateway.key, "content-type": "application/json", **(headers or {})}
    async with http.post(gateway.url + path, data=data, json=json, headers=h) as resp:
        return resp.status, resp.headers.copy(), await resp.json(content_type=None)


def assert_anthropic_error(status: int, headers: dict[str, Any], body: Any, want: int) -> None:
    assert status == want, body
    assert body["type"] == "error"
    assert body["request_id"] == headers["request-id"] == headers["x-request-id"]
    assert "Traceback" not in body["error"]["message"]


BAD_BODIES = [
    pytest.param(b"{not json", "request body", id="malformed-json"),
    pytest.param(b"[1, 2]", "request body", id="not-an-object"),
    pytest.param(b"", "request body", id="empty-body"),
    pytest.param({"max_tokens": 5, "messages": OK_MESSAGES}, "model", id="missing-model"),
    pytest.param({"model": 5, "max_tokens": 5, "messages": OK_MESSAGES}, "model", id="model-type"),
    pytest.param({"model": MODEL, "messages": OK_MESSAGES}, "max_tokens", id="missing-max-tokens"),
    pytest.param(
        {"model": MODEL, "max_tokens": "5", "messages": OK_MESSAGES}, "max_tokens", id="max-str"
    ),
    pytest.param(
        {"model": MODEL, "max_tokens": 0, "messages": OK_MESSAGES}, "max_tokens", id="max0"
    ),
    pytest.param({"model": MODEL, "max_tokens": 5}, "messages", id="missing-messages"),
    pytest.param(
        {"model": MODEL, "max_tokens": 5, "messages": []}, "messages", id="empty-messages"
    ),
    pytest.param({"model": MODEL, "max_tokens": 5, "messages": {}}, "messages", id="messages-type"),
    pytest.param(
        {"model": MODEL, "max_tokens": 5, "messages": OK_MESSAGES, "stream": "yes"},
        "stream",
        id="stream-type",
    ),
    pytest.param(
        {"model": "", "max_tokens": 5, "messages": OK_MESSAGES}, "model", id="model-empty"
    ),
    pytest.param(
        {"model": "x" * 129, "max_tokens": 5, "messages": OK_MESSAGES}, "model", id="model-long"
    ),
]


@pytest.mark.parametrize(("body", "field"), BAD_BODIES)
async def test_bad_body_is_400_naming_the_field(
    gateway: Gateway, http: aiohttp.ClientSession, body: Any, field: str
) -> None:
    data = body if isinstance(body, bytes) else None
    status, headers, out = await post(
        http, gateway, "/v1/messages", data=data, json=None if data is not None else body
    )
    assert_anthropic_error(status, headers, out, 400)
    assert out["error"]["type"] == "invalid_request_error"
    assert out["error"]["message"].startswith(field + ":"), out["error"]["message"]


async def test_unknown_model_is_404(gateway: Gateway, http: aiohttp.ClientSession) -> None:
    body = {"model": "claude-nope", "max_tokens": 5, "messages": OK_MESSAGES}
    status, headers, out = await post(http, gateway, "/v1/messages", json=body)
    assert_anthropic_error(status, headers, out, 404)
    assert out["error"]["type"] == "not_found_error"
    assert "`claude-nope`" in out["error"]["message"]


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param({"x-api-key": ""}, id="empty"),
        pytest.param({"x-api-key": "ezat_sk_notarealkeyatall000000000"}, id="unknown"),
        pytest.param({"x-api-key": "sk-ant-something"}, id="foreign"),
        pytest.param({"authorization": "Basic abc"}, id="wrong-scheme"),
    ],
)
async def test_bad_keys_are_401(
    gateway: Gateway, http: aiohttp.ClientSession, headers: dict[str, str]
) -> None:
    body = {"model": MODEL, "max_tokens": 5, "messages": OK_MESSAGES}
    async with http.post(gateway.url + "/v1/messages", json=body, headers=headers) as resp:
        out = await resp.json()
        assert_anthropic_error(resp.status, resp.headers.copy(), out, 401)
    assert out["error"]["type"] == "authentication_error"


async def test_missing_key_is_401_on_every_endpoint(
    gateway: Gateway, http: aiohttp.ClientSession
) -> None:
    for method, path in [
        ("POST", "/v1/messages"),
        ("POST", "/v1/messages/count_tokens"),
        ("GET", "/v1/models"),
        ("GET", "/openai/v1/models"),
        ("GET", "/api/usage"),
    ]:
        async with http.request(method, gateway.url + path, json={}) as resp:
            assert resp.status == 401, path


async def test_body_over_32mb_is_413_without_reading_it(
    gateway: Gateway, http: aiohttp.ClientSession
) -> None:
    headers = {"x-api-key": gateway.key, "content-type": "application/json"}
    headers["content-length"] = str(33 * 1024 * 1024)

    async def trickle():  # type: ignore[no-untyped-def]
        # Only 1 MB is ever sent: the 413 must come from the declared length alone.
        yield b'{"model": "x", "pad": "' + b"a" * (1024 * 1024)

    try:
        async with http.post(gateway.url + "/v1/messages", data=trickle(), headers=headers) as r:
            out = await r.json()
            status = r.status
    except aiohttp.ClientError as exc:  # pragma: no cover - diagnostic
        pytest.fail(f"no 413 answer: {exc!r}")
    assert status == 413
    assert out["error"]["type"] == "request_too_large"


async def test_chunked_body_over_limit_is_413(
    gateway: Gateway, http: aiohttp.ClientSession
) -> None:
    async def chunks():  # type: ignore[no-untyped-def]
        yield b'{"pad": "'
        for _ in range(34):
            yield b"a" * (1024 * 1024)
        yield b'"}'

    headers = {"x-api-key": gateway.key, "content-type": "application/json"}
    async with http.post(gateway.url + "/v1/messages", data=chunks(), headers=headers) as r:
        assert r.status == 413
        out = await r.json()
    assert out["error"]["type"] == "request_too_large"


@pytest.mark.parametrize(
    ("sent", "kept"),
    [
        ("my-id_1.2:3", True),
        ("a" * 128, True),
        ("a" * 129, False),
        ("has space", False),
        ("bad/slash", False),
        ("", False),
    ],
)
async def test_request_id_rule(
    gateway: Gateway, http: aiohttp.ClientSession, sent: str, kept: bool
) -> None:
    body = {"model": "nope-model", "max_tokens": 5, "messages": OK_MESSAGES}
    status, headers, out = await post(
        http, gateway, "/v1/messages", json=body, headers={"x-request-id": sent}
    )
    assert status == 404
    rid = headers["request-id"]
    assert headers["x-request-id"] == rid == out["request_id"]
    if kept:
        assert rid == sent
    else:
        assert rid != sent
        assert len(rid) == 36  # a fresh UUID


async def test_request_id_is_on_success_too(gateway: Gateway, http: aiohttp.ClientSession) -> None:
    body = {"model": MODEL, "max_tokens": 5, "messages": OK_MESSAGES}
    status, headers, _ = await post(
        http, gateway, "/v1/messages", json=body, headers={"x-request-id": "ok-rid-1"}
    )
    assert status == 200
    assert headers["request-id"] == headers["x-request-id"] == "ok-rid-1"


async def test_unknown_path_is_404_in_anthropic_format(
    gateway: Gateway, http: aiohttp.ClientSession
) -> None:
    async with http.get(gateway.url + "/v1/nope", headers={"x-api-key": gateway.key}) as r:
        out = await r.json()
        assert r.status == 404
    assert out["error"]["type"] == "not_found_error"
