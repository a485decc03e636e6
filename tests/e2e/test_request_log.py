"""The request log (docs/observability.md, "Request log") through the running stack: every answer,
the edge's own refusals (401, 404, 429) and an upstream's failure (500, 529) as much as a
success, is found by its request id in ``GET /admin/v1/requests`` with its status, its upstream's
status and the reason; and no log line of any of the stack's processes holds a prompt or a key
secret the test sent."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import aiohttp
import anthropic
import asyncpg
import pytest

from .conftest import Gateway
from .test_attribution import team_and_key

MODEL = "anthropic/claude-sonnet-5-5"
WAIT = 10.0  # seconds for an entry to be stored (the edge stores at most every 1 s)


def operator(gateway: Gateway) -> dict[str, str]:
    return {"authorization": f"Bearer {gateway.stack.operator_token}"}


async def entry_of(gateway: Gateway, http: aiohttp.ClientSession, rid: str) -> dict[str, Any]:
    """The stored entry of request ``rid``, waiting for it."""
    for _ in range(int(WAIT / 0.1)):
        async with http.get(
            gateway.url + "/admin/v1/requests",
            params={"request_id": rid},
            headers=operator(gateway),
        ) as r:
            assert r.status == 200, await r.text()
            page = await r.json()
        if page["data"]:
            assert len(page["data"]) == 1, page
            entry: dict[str, Any] = page["data"][0]
            return entry
        await asyncio.sleep(0.1)
    raise AssertionError(f"no request-log entry for {rid}")


def rid_of(exc: anthropic.APIStatusError) -> str:
    return exc.response.headers["request-id"]


async def test_every_answer_is_found_by_its_request_id_with_its_reason(
    gateway: Gateway, http: aiohttp.ClientSession, new_key: Any, clean_sims: None
) -> None:
    mark = uuid.uuid4().hex[:10]
    team, key_id, secret = await team_and_key(gateway, http)
    async with anthropic.AsyncAnthropic(
        base_url=gateway.url, api_key=secret, max_retries=0
    ) as claude:
        ok = await claude.messages.with_raw_response.create(
            model=MODEL, max_tokens=16, messages=[{"role": "user", "content": f"ok {mark}"}]
        )
        with pytest.raises(anthropic.NotFoundError) as unknown:
            await claude.messages.create(
                model="no-such-model", max_tokens=8, messages=[{"role": "user", "content": "x"}]
            )
        failures = {}
        for code in (500, 529):
            with pytest.raises(anthropic.APIStatusError) as failed:
                await claude.messages.create(
                    model=MODEL,
                    max_tokens=8,
                    messages=[{"role": "user", "content": f"fail {mark} [sim:status={code}]"}],
                )
            failures[code] = rid_of(failed.value)
    async with anthropic.AsyncAnthropic(
        base_url=gateway.url, api_key="ezat_sk_" + "0" * 40, max_retries=0
    ) as stranger:
        with pytest.raises(anthropic.AuthenticationError) as refused:
            await stranger.messages.create(
                model=MODEL, max_tokens=8, messages=[{"role": "user", "content": "x"}]
            )
    limited_secret = await new_key("reqlog-rpm", rpm=1)
    async with anthropic.AsyncAnthropic(
        base_url=gateway.url, api_key=limited_secret, max_retries=0
    ) as limited:
        await limited.messages.create(
            model=MODEL, max_tokens=8, messages=[{"role": "user", "content": "first"}]
        )
        with pytest.raises(anthropic.RateLimitError) as too_many:
            await limited.messages.create(
                model=MODEL, max_tokens=8, messages=[{"role": "user", "content": "second"}]
            )

    done = await entry_of(gateway, http, ok.headers["request-id"])
    assert done["status"] == 200 and done["upstream_status"] == 200
    assert (done["key_id"], done["team_id"], done["api"]) == (key_id, team, "messages")
    assert done["model"] == MODEL and done["stream"] is False
    assert done["input_tokens"] > 0 and done["output_tokens"] > 0
    assert done["cost_usd"] > 0 and done["error_type"] is None
    assert done["latency_ms"] >= done["ttft_ms"] > 0
    assert done["at"].endswith("Z")

    nowhere = await entry_of(gateway, http, rid_of(unknown.value))
    assert (nowhere["status"], nowhere["error_type"]) == (404, "not_found_error")
    assert nowhere["upstream_status"] is None and "no-such-model" in nowhere["error_reason"]

    for code, rid in failures.items():
        failed_entry = await entry_of(gateway, http, rid)
        assert failed_entry["status"] == code
        assert failed_entry["upstream_status"] == code, failed_entry
        assert failed_entry["error_reason"] and failed_entry["cost_usd"] == 0

    stranger_entry = await entry_of(gateway, http, rid_of(refused.value))
    assert stranger_entry["status"] == 401 and stranger_entry["key_id"] == ""
    assert stranger_entry["error_type"] == "authentication_error"

    limited_entry = await entry_of(gateway, http, rid_of(too_many.value))
    assert (limited_entry["status"], limited_entry["error_type"]) == (429, "rate_limit_error")
    assert limited_entry["key_id"].startswith("key_") and limited_entry["upstream_status"] is None

    # Filters: the key's entries, newest first; a class of statuses.
    async with http.get(
        gateway.url + "/admin/v1/requests",
        params={"key": key_id, "limit": "2"},
        headers=operator(gateway),
    ) as r:
        page = await r.json()
    assert page["has_more"] is True and len(page["data"]) == 2
    assert [e["request_id"] for e in page["data"]] == [failures[529], failures[500]]
    async with http.get(
        gateway.url + "/admin/v1/requests",
        params={"key": key_id, "status": "5xx"},
        headers=operator(gateway),
    ) as r:
        statuses = sorted(e["status"] for e in (await r.json())["data"])
    assert statuses == [500, 529]


async def test_a_stream_names_its_api_tokens_and_time_to_first_token(
    gateway: Gateway, http: aiohttp.ClientSession
) -> None:
    async with gateway.openai() as gpt:
        stream = await gpt.chat.completions.with_raw_response.create(
            model=MODEL,
            max_tokens=16,
            stream=True,
            stream_options={"include_usage": True},
            messages=[{"role": "user", "content": "stream me"}],
        )
        async for _ in stream.parse():
            pass
    entry = await entry_of(gateway, http, stream.headers["request-id"])
    assert (entry["api"], entry["stream"], entry["status"]) == ("chat", True, 200)
    assert entry["output_tokens"] > 0 and entry["ttft_ms"] is not None
    assert entry["upstream_status"] == 200


async def test_the_endpoint_is_the_operators_and_names_a_bad_parameter(
    gateway: Gateway, http: aiohttp.ClientSession
) -> None:
    url = gateway.url + "/admin/v1/requests"
    async with http.get(url, params={"limit": "5"}) as r:
        assert r.status == 401
    async with http.get(url, headers={"authorization": f"Bearer {gateway.key}"}) as r:
        assert r.status == 403  # a client key is no operator token
    for params, named in (({"limit": "0"}, "limit"), ({"status": "abc"}, "status")):
        async with http.get(url, params=params, headers=operator(gateway)) as r:
            assert r.status == 400
            assert named in (await r.text())


async def test_no_log_line_holds_a_prompt_or_a_secret(
    gateway: Gateway, http: aiohttp.ClientSession, new_key: Any
) -> None:
    """Every line every process of the stack wrote during this session is searched for what this
    test sent: its prompts (streamed, not, refused, failed upstream) and its keys' secrets."""
    prompt = f"do-not-log-this-prompt-{uuid.uuid4().hex}"
    secret = await new_key("reqlog-secret", rpm=2)
    wrong = "ezat_sk_" + uuid.uuid4().hex + uuid.uuid4().hex[:8]
    rids = []
    async with anthropic.AsyncAnthropic(base_url=gateway.url, api_key=secret, max_retries=0) as c:
        raw = await c.messages.with_raw_response.create(
            model=MODEL, max_tokens=8, messages=[{"role": "user", "content": prompt}]
        )
        rids.append(raw.headers["request-id"])
        with pytest.raises(anthropic.APIStatusError) as failed:
            await c.messages.create(
                model=MODEL,
                max_tokens=8,
                messages=[{"role": "user", "content": f"{prompt} [sim:status=500]"}],
            )
        rids.append(rid_of(failed.value))
        with pytest.raises(anthropic.RateLimitError) as limited:
            await c.messages.create(
                model=MODEL, max_tokens=8, messages=[{"role": "user", "content": prompt}]
            )
        rids.append(rid_of(limited.value))
    async with gateway.openai() as gpt:
        stream = await gpt.chat.completions.create(
            model=MODEL,
            max_tokens=8,
            stream=True,
            messages=[{"role": "user", "content": prompt}],
        )
        async for _ in stream:
            pass
    async with anthropic.AsyncAnthropic(base_url=gateway.url, api_key=wrong, max_retries=0) as c:
        with pytest.raises(anthropic.AuthenticationError) as refused:
            await c.messages.create(
                model=MODEL, max_tokens=8, messages=[{"role": "user", "content": prompt}]
            )
        rids.append(rid_of(refused.value))
    for rid in rids:
        await entry_of(gateway, http, rid)  # stored, so logged: the lines have been written
    await asyncio.sleep(0.5)  # batched log lines leave within 0.1 s

    logs = sorted((gateway.stack.data_dir / "logs").glob("*.log"))
    assert logs, "no log files"
    lines = [line for path in logs for line in path.read_text(errors="replace").splitlines()]
    edge_lines = [line for line in lines if '"msg":"request"' in line]
    for rid in rids:
        assert any(rid in line for line in edge_lines), f"no request line for {rid}"
    forbidden = [prompt, secret, wrong, gateway.key, gateway.stack.operator_token]
    for needle in forbidden:
        hits = [line[:200] for line in lines if needle in line]
        assert not hits, f"a log line holds what must never be logged: {hits[:3]}"


async def test_a_client_that_leaves_is_logged_as_closed(
    gateway: Gateway, http: aiohttp.ClientSession, clean_sims: None
) -> None:
    for sim in (gateway.sim_a, gateway.sim_b):
        await gateway.sim_faults(sim, delay_ms=3000, count=-1)
    rid = f"reqlog-left-{uuid.uuid4().hex[:8]}"
    body = {"model": MODEL, "max_tokens": 8, "messages": [{"role": "user", "content": "wait"}]}
    headers = {"x-api-key": gateway.key, "x-request-id": rid}
    with pytest.raises(TimeoutError):
        async with http.post(
            gateway.url + "/v1/messages",
            json=body,
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=0.5),
        ) as r:
            await r.read()
    entry = await entry_of(gateway, http, rid)
    assert (entry["status"], entry["error_type"]) == (499, "client_closed")
    assert entry["key_id"].startswith("key_") and entry["latency_ms"] >= 400


async def test_an_upstream_error_quoting_the_prompt_is_relayed_but_never_logged(
    gateway: Gateway, http: aiohttp.ClientSession
) -> None:
    """A deployment's 4xx whose message quotes the prompt (the simulator's ``echo``): the client
    gets that message, the request log (its line, its row) only the gateway's words."""
    prompt = f"secret-prompt-{uuid.uuid4().hex}"
    content = f"{prompt} [sim:status=400 echo]"
    rids = []
    async with anthropic.AsyncAnthropic(
        base_url=gateway.url, api_key=gateway.key, max_retries=0
    ) as claude:
        for stream in (False, True):
            with pytest.raises(anthropic.BadRequestError) as rejected:
                await claude.messages.create(
                    model=MODEL,
                    max_tokens=8,
                    stream=stream,
                    messages=[{"role": "user", "content": content}],
                )
            assert prompt in rejected.value.message  # the client's own words, relayed
            rids.append(rid_of(rejected.value))
    for rid in rids:
        entry = await entry_of(gateway, http, rid)
        assert (entry["status"], entry["upstream_status"]) == (400, 400)
        assert entry["error_type"] == "invalid_request_error"
        assert entry["error_reason"] == (
            "the deployment rejected the request (HTTP 400, invalid_request_error)"
        )
    conn = await asyncpg.connect(gateway.database_url)
    try:
        stored = await conn.fetchval(
            "SELECT count(*) FROM request_log WHERE strpos(error_reason, $1) > 0", prompt
        )
    finally:
        await conn.close()
    assert stored == 0
    await asyncio.sleep(0.5)  # batched log lines leave within 0.1 s
    lines = [
        line
        for path in sorted((gateway.stack.data_dir / "logs").glob("*.log"))
        for line in path.read_text(errors="replace").splitlines()
    ]
    assert all(any(rid in line for line in lines) for rid in rids)
    hits = [line[:300] for line in lines if prompt in line]
    assert not hits, f"a log line holds the prompt: {hits[:3]}"
