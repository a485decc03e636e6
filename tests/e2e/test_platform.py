"""Platform endpoints and NATS payload limits: models, health, readiness, metrics, 10 MB bodies."""

from __future__ import annotations

import asyncio

import aiohttp

from .conftest import Gateway

MODEL = "anthropic/claude-sonnet-5-5"


async def test_ten_megabyte_request_crosses_nats(gateway: Gateway) -> None:
    client = gateway.anthropic(timeout=120)
    big = "word " * (2 * 1024 * 1024)  # 10 MB of text, far above NATS max_payload (1 MB)
    raw = await client.messages.with_raw_response.create(
        model=MODEL,
        max_tokens=8,
        messages=[{"role": "user", "content": big + "[sim:tokens=3]"}],
        extra_headers={"x-request-id": "big-body-1"},
    )
    message = await raw.parse()
    assert message.usage.input_tokens >= 2 * 1024 * 1024
    assert len(message.content[0].text) == 12
    seen = await gateway.sim_requests(gateway.sim_a, 5) + await gateway.sim_requests(
        gateway.sim_b, 5
    )
    sent = next(r for r in seen if r["headers"].get("x-request-id") == "big-body-1")
    assert sent["body"]["messages"][0]["content"] == big + "[sim:tokens=3]"


async def test_anthropic_models_list(gateway: Gateway) -> None:
    page = await gateway.anthropic().models.list()
    ids = [m.id for m in page.data]
    assert MODEL in ids and "anthropic/claude-instant-sim" in ids


async def test_openai_models_list_format(gateway: Gateway, http: aiohttp.ClientSession) -> None:
    async with http.get(
        gateway.url + "/openai/v1/models", headers={"authorization": f"Bearer {gateway.key}"}
    ) as r:
        data = await r.json()
    assert data["object"] == "list"
    entry = next(m for m in data["data"] if m["id"] == MODEL)
    assert set(entry) == {"id", "object", "created", "owned_by"}
    assert entry["object"] == "model"


async def test_public_catalogue_has_capabilities(
    gateway: Gateway, http: aiohttp.ClientSession
) -> None:
    async with http.get(gateway.url + "/api/models") as r:
        assert r.status == 200
        data = await r.json()
    sonnet = next(m for m in data["data"] if m["id"] == MODEL)
    assert sonnet["aliases"] == ["claude-sonnet-5-5", "claude-sonnet-5.5"]
    assert sonnet["context_window"] == 200000
    assert sonnet["max_output_tokens"] == 64000
    assert sonnet["pricing"]["input"] == 3.0
    assert sonnet["pricing"]["cache_read"] == 0.3
    caps = sonnet["capabilities"]
    assert caps["promptCaching"] is True
    assert caps["sampling"] is False
    assert caps["effortLevels"] == ["low", "medium", "high", "xhigh", "max"]
    assert set(caps) >= {"sampling", "promptCaching", "thinking", "effortLevels", "vision"}
    instant = next(m for m in data["data"] if m["id"] == "anthropic/claude-instant-sim")
    assert instant["capabilities"]["promptCaching"] is False


async def test_health_readiness_and_metrics(gateway: Gateway, http: aiohttp.ClientSession) -> None:
    async with http.get(gateway.url + "/healthz") as r:
        assert r.status == 200
    async with http.get(gateway.url + "/readyz") as r:
        data = await r.json()
        assert r.status == 200, data
    # This edge's own checks; the other services are the operator's /api/status.
    assert data["checks"] == {"nats": "ok", "database": "ok", "auth": "ok"}
    operator = {"authorization": f"Bearer {gateway.stack.operator_token}"}
    async with http.get(gateway.url + "/api/status", headers=operator) as r:
        status = await r.json()
        assert r.status == 200, status
    for service in ("translator", "router", "billing", "fetcher"):
        assert status["services"][service]["ready"] == 1, status
    async with http.get(gateway.url + "/metrics") as r:
        text = await r.text()
    assert "ezat_edge_requests_total" in text


async def test_usage_query_parameters_are_checked_and_applied(
    gateway: Gateway, http: aiohttp.ClientSession
) -> None:
    auth = {"x-api-key": gateway.key}
    for query, param in [("limit=0", "limit"), ("limit=x", "limit"), ("from=yesterday", "from")]:
        async with http.get(f"{gateway.url}/api/usage?{query}", headers=auth) as r:
            body = await r.json()
            assert r.status == 400, query
        assert body["error"]["message"].startswith(param + ":"), body
    await gateway.anthropic().messages.create(
        model="claude-instant", max_tokens=4, messages=[{"role": "user", "content": "bill"}]
    )
    query = "model=anthropic/claude-instant-sim&limit=1&from=2020-01-01T00:00:00Z"
    for _ in range(100):  # the row follows the durable outbox record within milliseconds
        async with http.get(f"{gateway.url}/api/usage?{query}", headers=auth) as r:
            page = await r.json()
        if page["data"]:
            break
        await asyncio.sleep(0.05)
    assert [rec["model"] for rec in page["data"]] == ["anthropic/claude-instant-sim"]
    # The newest row overall is that instant one: a sonnet filter must skip it.
    async with http.get(
        f"{gateway.url}/api/usage?model=anthropic/claude-sonnet-5-5&limit=1", headers=auth
    ) as r:
        assert [rec["model"] for rec in (await r.json())["data"]] == [MODEL]
    async with http.get(f"{gateway.url}/api/usage?to=2020-01-01T00:00:00Z", headers=auth) as r:
        assert (await r.json())["data"] == []
