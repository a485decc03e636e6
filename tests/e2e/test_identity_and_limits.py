"""Request identity (uid) versus the client-visible request id, rate limits (docs/api.md,
"Limits"), bodies nested too deeply, and URL image sources on the Messages API (docs/api.md,
"Messages API")."""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import asyncpg
import pytest
from ezat_common import db
from support import images
from support.images import PNG

from .conftest import Gateway

MODEL = "anthropic/claude-sonnet-5-5"


async def key_id(gateway: Gateway, secret: str) -> str:
    conn = await asyncpg.connect(gateway.database_url)
    try:
        key = await db.find_key(conn, secret)
    finally:
        await conn.close()
    assert key is not None
    return key.id


async def usage_rows(
    gateway: Gateway, kid: str, request_id: str, want: int, wait: float = 10.0
) -> list[asyncpg.Record]:
    deadline = time.monotonic() + wait
    conn = await asyncpg.connect(gateway.database_url)
    try:
        while True:
            rows = await conn.fetch(
                "SELECT * FROM usage_records WHERE key_id = $1 AND request_id = $2",
                kid,
                request_id,
            )
            if len(rows) >= want or time.monotonic() >= deadline:
                return list(rows)
            await asyncio.sleep(0.05)
    finally:
        await conn.close()


def stream_body(prompt: str) -> dict[str, Any]:
    return {
        "model": MODEL,
        "max_tokens": 500,
        "stream": True,
        "messages": [{"role": "user", "content": prompt}],
    }


async def test_same_request_id_from_two_keys_are_two_requests(
    gateway: Gateway, new_key: Any
) -> None:
    """Two keys send concurrent streams with the same x-request-id: the first client leaves
    after two events; that cancellation must not touch the second stream, which completes, and
    each request has its own usage row."""
    secret_a, secret_b = await new_key("uid-a"), await new_key("uid-b")
    kid_a, kid_b = await key_id(gateway, secret_a), await key_id(gateway, secret_b)
    rid = f"shared-{time.time_ns()}"
    url = gateway.url + "/v1/messages"

    async def leave_after_two_events() -> int:
        events = 0
        async with aiohttp.ClientSession() as s:
            headers = {"x-api-key": secret_a, "x-request-id": rid}
            body = stream_body("long [sim:tokens=200] [sim:token_ms=30]")
            async with s.post(url, json=body, headers=headers) as resp:
                assert resp.status == 200
                async for line in resp.content:
                    if line.startswith(b"event:") and b"ping" not in line:
                        events += 1
                        if events == 2:
                            break
        return events

    async def read_all() -> bytes:
        async with aiohttp.ClientSession() as s:
            headers = {"x-api-key": secret_b, "x-request-id": rid}
            body = stream_body("steady [sim:tokens=40] [sim:token_ms=25]")
            async with s.post(url, json=body, headers=headers) as resp:
                assert resp.status == 200
                assert resp.headers["x-request-id"] == rid
                return await resp.read()

    left, text = await asyncio.gather(leave_after_two_events(), read_all())
    assert left == 2
    assert b"message_stop" in text
    assert b'"type": "error"' not in text and b'"type":"error"' not in text

    rows_b = await usage_rows(gateway, kid_b, rid, 1)
    assert len(rows_b) == 1 and rows_b[0]["status"] == "complete", rows_b
    # Needs billing keyed by uid (the other engineer's migration): with request_id as the
    # primary key the second request's row collides with the first one's.
    rows_a = await usage_rows(gateway, kid_a, rid, 1)
    assert len(rows_a) == 1 and rows_a[0]["status"] == "client_closed", rows_a


async def _away_from_minute_end() -> None:
    """The limit windows are fixed minutes: do not start a test that spans two of them."""
    left = 60 - time.time() % 60
    if left < 5:
        await asyncio.sleep(left + 0.2)


async def test_rpm_429_has_retry_after_and_headers_and_count_tokens_counts(
    gateway: Gateway, new_key: Any, http: aiohttp.ClientSession
) -> None:
    secret = await new_key("rpm-2", rpm=2)
    await _away_from_minute_end()
    headers = {"x-api-key": secret}
    count = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
    for n in (1, 2):
        async with http.post(
            gateway.url + "/v1/messages/count_tokens", json=count, headers=headers
        ) as resp:
            assert resp.status == 200, await resp.text()
            assert resp.headers["x-ratelimit-limit-requests"] == "2"
            assert resp.headers["x-ratelimit-remaining-requests"] == str(2 - n)
    body = {"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    async with http.post(gateway.url + "/v1/messages", json=body, headers=headers) as resp:
        assert resp.status == 429
        data = await resp.json()
        assert data["error"]["type"] == "rate_limit_error"
        assert "2 requests per minute" in data["error"]["message"]
        assert data["request_id"] == resp.headers["request-id"]
        assert 1 <= int(resp.headers["retry-after"]) <= 60
        assert resp.headers["x-ratelimit-limit-requests"] == "2"
        assert resp.headers["x-ratelimit-remaining-requests"] == "0"
        assert resp.headers["x-ratelimit-reset-requests"].endswith("s")


async def test_tpm_counts_estimated_input_tokens(
    gateway: Gateway, new_key: Any, http: aiohttp.ClientSession
) -> None:
    secret = await new_key("tpm-300", tpm=300)
    await _away_from_minute_end()
    headers = {"x-api-key": secret}
    small = {"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    async with http.post(gateway.url + "/v1/messages", json=small, headers=headers) as resp:
        assert resp.status == 200, await resp.text()
        assert resp.headers["x-ratelimit-limit-tokens"] == "300"
        remaining = int(resp.headers["x-ratelimit-remaining-tokens"])
        assert 200 < remaining < 300  # ~100 bytes of body count as ~25 tokens
        assert resp.headers["x-ratelimit-reset-tokens"].endswith("s")
    big = {**small, "messages": [{"role": "user", "content": "x" * 2000}]}  # ~500 tokens
    async with http.post(gateway.url + "/v1/messages", json=big, headers=headers) as resp:
        assert resp.status == 429
        data = await resp.json()
        assert data["error"]["type"] == "rate_limit_error"
        assert "300 input tokens per minute" in data["error"]["message"]
        assert int(resp.headers["retry-after"]) >= 1
        assert resp.headers["x-ratelimit-limit-tokens"] == "300"
        assert int(resp.headers["x-ratelimit-remaining-tokens"]) == remaining
    # The refused request gave its estimate back: a small one still fits.
    async with http.post(gateway.url + "/v1/messages", json=small, headers=headers) as resp:
        assert resp.status == 200, await resp.text()
        assert int(resp.headers["x-ratelimit-remaining-tokens"]) < remaining


@pytest.mark.parametrize(
    ("path", "head"),
    [
        (
            "/v1/messages",
            b'{"model":"%s","max_tokens":5,"messages":[{"role":"user","content":"x"}],',
        ),
        (
            "/openai/v1/chat/completions",
            b'{"model":"%s","messages":[{"role":"user","content":"x"}],',
        ),
    ],
    ids=["messages", "chat"],
)
async def test_deeply_nested_body_is_a_400(
    gateway: Gateway, http: aiohttp.ClientSession, path: str, head: bytes
) -> None:
    depth = 100_000
    body = (head % MODEL.encode()) + b'"metadata":' + b"[" * depth + b"]" * depth + b"}"
    headers = {"x-api-key": gateway.key, "content-type": "application/json"}
    async with http.post(gateway.url + path, data=body, headers=headers) as resp:
        assert resp.status == 400
        assert resp.content_type == "application/json"
        data = await resp.json()
    message = data["error"]["message"]
    assert message == "request body: is nested too deeply"
    assert "Traceback" not in message


@pytest.fixture
async def image_server() -> AsyncIterator[str]:
    async with images.serving() as url:
        yield url


async def test_messages_url_images_are_downloaded_and_sent_inline(
    gateway: Gateway, http: aiohttp.ClientSession, image_server: str
) -> None:
    rid = f"msg-url-image-{time.time_ns()}"
    url_image = {"type": "image", "source": {"type": "url", "url": f"{image_server}/photo.png"}}
    body = {
        "model": MODEL,
        "max_tokens": 16,
        "messages": [
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_1", "name": "look", "input": {}}],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": [url_image]},
                    {"type": "text", "text": "and this one?"},
                    url_image,
                ],
            },
        ],
    }
    headers = {"x-api-key": gateway.key, "x-request-id": rid}
    async with http.post(gateway.url + "/v1/messages", json=body, headers=headers) as resp:
        assert resp.status == 200, await resp.text()
    sent = (await gateway.sent_upstream(rid))["body"]["messages"][1]["content"]
    for block in (sent[0]["content"][0], sent[2]):
        assert block["type"] == "image"
        assert block["source"]["type"] == "base64"
        assert block["source"]["media_type"] == "image/png"
        assert base64.b64decode(block["source"]["data"]) == PNG

    missing = {"type": "image", "source": {"type": "url", "url": f"{image_server}/missing.png"}}
    bad = {
        "model": MODEL,
        "max_tokens": 16,
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "x"}, missing]},
        ],
    }
    async with http.post(gateway.url + "/v1/messages", json=bad, headers=headers) as resp:
        assert resp.status == 400
        data = await resp.json()
    assert data["error"]["message"] == (
        "messages[0].content[1].source.url: could not download the image (HTTP 404)"
    )
