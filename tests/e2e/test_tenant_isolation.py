"""What one tenant can never reach of another through the public surface (docs/security.md):
hostile text in every query parameter and name stays data (no SQL runs from it), and a metrics
scrape never carries a key, a request id or prompt text."""

from __future__ import annotations

import uuid
from typing import Any

import aiohttp
import asyncpg

from .conftest import Gateway

MODEL = "anthropic/claude-sonnet-5-5"
# Classic injections: quoting, comments, stacked statements, a tautology, a cast error.
HOSTILE = [
    "' OR '1'='1",
    "x'; DROP TABLE usage_records; --",
    'x"; DELETE FROM api_keys; --',
    "1) OR (1=1",
    "' UNION SELECT key_hash, name FROM api_keys --",
    "$1",
    "\\'; SELECT pg_sleep(5); --",
]


async def _usage(http: aiohttp.ClientSession, gateway: Gateway, secret: str, **q: str) -> Any:
    async with http.get(
        f"{gateway.url}/api/usage", params=q, headers={"x-api-key": secret}
    ) as resp:
        return resp.status, await resp.json()


async def test_hostile_usage_filters_are_data_and_never_show_another_keys_rows(
    gateway: Gateway, new_key: Any, http: aiohttp.ClientSession
) -> None:
    secret_a, secret_b = await new_key("inject-a"), await new_key("inject-b")
    async with gateway.anthropic(api_key=secret_a) as client:
        await client.messages.create(
            model=MODEL, max_tokens=16, messages=[{"role": "user", "content": "hi"}]
        )
    status, page = await _usage(http, gateway, secret_a, limit="10")
    assert status == 200 and len(page["data"]) == 1
    for text in HOSTILE:
        for param in ("model", "cursor", "from", "to"):
            status, body = await _usage(http, gateway, secret_b, **{param: text})
            # A bad time or cursor is a 400 naming it; a strange model name matches nothing.
            assert status in (200, 400), (param, text, status, body)
            if status == 200:
                assert body["data"] == [], (param, text)
            else:
                assert body["error"]["message"].startswith(param), body
    conn = await asyncpg.connect(gateway.database_url)
    try:
        assert await conn.fetchval("SELECT count(*) FROM api_keys") >= 2
        assert await conn.fetchval("SELECT count(*) FROM usage_records") >= 1
    finally:
        await conn.close()
    status, page = await _usage(http, gateway, secret_a, limit="10")
    assert status == 200 and len(page["data"]) == 1


async def test_hostile_key_names_are_stored_as_written(gateway: Gateway, new_key: Any) -> None:
    for text in HOSTILE:
        await new_key(text)
    conn = await asyncpg.connect(gateway.database_url)
    try:
        names = {r["name"] for r in await conn.fetch("SELECT name FROM api_keys")}
    finally:
        await conn.close()
    assert set(HOSTILE) <= names


async def test_a_metrics_scrape_carries_no_key_request_id_or_prompt(
    gateway: Gateway, new_key: Any, http: aiohttp.ClientSession
) -> None:
    secret = await new_key("scrape")
    marker = f"prompt-marker-{uuid.uuid4().hex}"
    rid = f"rid-marker-{uuid.uuid4().hex}"
    async with gateway.anthropic(api_key=secret) as client:
        await client.messages.create(
            model=MODEL,
            max_tokens=16,
            messages=[{"role": "user", "content": marker}],
            extra_headers={"x-request-id": rid, "x-ezat-session": "session-marker"},
        )
    async with gateway.openai(api_key=secret) as oai:
        await oai.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": marker}], max_tokens=16
        )
    row = await gateway.usage_row(rid)  # billing drains the outbox in milliseconds
    assert row is not None
    key_id = row["key_id"]
    assert key_id
    scrapes = []
    for url in (gateway.url + "/metrics", gateway.router_metrics):
        async with http.get(url) as resp:
            assert resp.status == 200
            scrapes.append(await resp.text())
    for text in scrapes:
        assert "ezat_" in text
        for secret_part in (secret, secret[8:20], key_id, rid, marker, "session-marker"):
            assert secret_part not in text
