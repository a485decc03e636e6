"""Spend attribution on every usage row (docs/billing.md, "Attribution"): the key's team and
user (or Anthropic's ``metadata.user_id``), ``x-ezat-tags``, the session headers and the client
family, through the official SDKs, on the row and in ``/api/usage``; a bad tag is a 400 naming
the header."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import aiohttp
import anthropic
import asyncpg
import pytest

from .conftest import Gateway

MODEL = "anthropic/claude-sonnet-5-5"


async def team_and_key(
    gateway: Gateway, http: aiohttp.ClientSession, user: str | None = "alice"
) -> tuple[str, str, str]:
    """A fresh team and a key of it (through the admin API): (team id, key id, secret)."""
    auth = {"authorization": f"Bearer {gateway.stack.operator_token}"}
    name = f"attr-{uuid.uuid4().hex[:8]}"
    async with http.post(gateway.url + "/admin/v1/teams", json={"name": name}, headers=auth) as r:
        assert r.status in (200, 201), await r.text()
        team = await r.json()
    body: dict[str, Any] = {"name": name, "team": team["id"]}
    if user is not None:
        body["user"] = user
    async with http.post(gateway.url + "/admin/v1/keys", json=body, headers=auth) as r:
        assert r.status in (200, 201), await r.text()
        key = await r.json()
    return team["id"], key["id"], key["key"]


async def settled(gateway: Gateway, request_ids: list[str], wait: float = 15.0) -> None:
    """Wait until every row of ``request_ids`` is stored and no longer awaits its delivery
    confirmation (the edge confirms within a fraction of a second)."""
    conn = await asyncpg.connect(gateway.database_url)
    try:
        for _ in range(int(wait / 0.05)):
            n = await conn.fetchval(
                "SELECT count(*) FROM usage_records WHERE request_id = ANY($1::text[])"
                " AND NOT awaiting_delivery",
                request_ids,
            )
            if n == len(request_ids):
                return
            await asyncio.sleep(0.05)
    finally:
        await conn.close()
    raise AssertionError("rows not settled in time")


async def test_rows_carry_team_user_tags_session_and_client(
    gateway: Gateway, http: aiohttp.ClientSession
) -> None:
    team, _, secret = await team_and_key(gateway, http)
    ids: dict[str, str] = {}
    async with anthropic.AsyncAnthropic(base_url=gateway.url, api_key=secret) as claude:
        raw = await claude.messages.with_raw_response.create(
            model=MODEL,
            max_tokens=16,
            messages=[{"role": "user", "content": "tagged [sim:tokens=3]"}],
            extra_headers={"x-ezat-tags": "proj:apollo, env=prod,team/a", "x-ezat-session": "s-1"},
        )
        ids["anthropic"] = raw.headers["request-id"]
        async with claude.messages.stream(
            model=MODEL,
            max_tokens=16,
            messages=[{"role": "user", "content": "as a user [sim:tokens=3]"}],
            metadata={"user_id": "end-user-42"},
            extra_headers={"x-claude-code-session-id": "cc-session-7"},
        ) as stream:
            ids["metadata"] = stream.response.headers["request-id"]
            await stream.get_final_message()
    async with gateway.openai(api_key=secret) as gpt:
        chat = await gpt.chat.completions.with_raw_response.create(
            model=MODEL, max_tokens=16, messages=[{"role": "user", "content": "openai"}]
        )
        ids["openai"] = chat.headers["request-id"]
        codex = await gpt.responses.with_raw_response.create(
            model=MODEL,
            input="codex",
            store=False,
            extra_headers={
                "user-agent": "codex_cli_rs/0.58.0 (Linux; x86_64)",
                "session_id": "cx-9",
            },
        )
        ids["codex"] = codex.headers["request-id"]

    rows = {name: await gateway.usage_row(rid) for name, rid in ids.items()}
    for name, row in rows.items():
        assert row is not None, name
        assert row["team_id"] == team, name
    a, m, o, c = rows["anthropic"], rows["metadata"], rows["openai"], rows["codex"]
    assert (a["user_name"], a["tags"], a["session"], a["client"]) == (
        "alice",
        ["proj:apollo", "env=prod", "team/a"],
        "s-1",
        "anthropic-sdk",
    )
    assert (m["user_name"], m["tags"], m["session"], m["client"]) == (
        "end-user-42",  # Anthropic's metadata.user_id over the key's user
        [],
        "cc-session-7",
        "anthropic-sdk",
    )
    assert (o["user_name"], o["session"], o["client"]) == ("alice", None, "openai-sdk")
    assert (c["user_name"], c["session"], c["client"]) == ("alice", "cx-9", "codex-cli")

    # /api/usage shows them, in JSON and CSV
    await settled(gateway, list(ids.values()))
    auth = {"x-api-key": secret}
    async with http.get(gateway.url + "/api/usage", headers=auth) as r:
        page = await r.json()
    shown = {item["request_id"]: item for item in page["data"]}
    item = shown[ids["anthropic"]]
    assert item["team_id"] == team
    assert (item["user"], item["tags"], item["session"], item["client"]) == (
        "alice",
        ["proj:apollo", "env=prod", "team/a"],
        "s-1",
        "anthropic-sdk",
    )
    assert shown[ids["codex"]]["client"] == "codex-cli"
    async with http.get(gateway.url + "/api/usage", headers={**auth, "accept": "text/csv"}) as r:
        text = await r.text()
    header = text.splitlines()[0].split(",")
    assert header[-5:] == ["team_id", "user", "tags", "session", "client"]
    assert '"proj:apollo,env=prod,team/a",s-1,anthropic-sdk' in text


@pytest.mark.parametrize(
    "tags",
    [
        "ok,bad tag",
        ",".join(f"t{i}" for i in range(11)),
        "a" * 65,
        "x,,y",
        "caf\u00e9",
    ],
)
async def test_a_bad_tag_is_a_400_naming_the_header(gateway: Gateway, tags: str) -> None:
    async with anthropic.AsyncAnthropic(
        base_url=gateway.url, api_key=gateway.key, max_retries=0
    ) as claude:
        with pytest.raises(anthropic.BadRequestError) as caught:
            await claude.messages.create(
                model=MODEL,
                max_tokens=8,
                messages=[{"role": "user", "content": "no"}],
                extra_headers={"x-ezat-tags": tags.encode().decode("latin-1")},
            )
    assert caught.value.status_code == 400
    assert "x-ezat-tags" in caught.value.message
