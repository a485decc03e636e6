"""Stored responses bounded (issue 26; docs/responses.md, "Stored responses"): a chain stores what
the model saw, linearly; a response's own turn and a key's total are limited; every response
has an id of its own; a malformed id is a 404 without a lookup; a forged seal key id is refused."""

from __future__ import annotations

import json
import secrets
import uuid
from typing import Any
from urllib.parse import quote

import aiohttp
import asyncpg
import openai
import pytest
from ezat_common import db
from ezat_common.seal_keys import new_key_entry, parse_keys
from ezat_translator.core.sealing import Sealer

from .conftest import (
    RETIRED_SEAL_KEY,
    STORED_CHAIN_MAX_BYTES,
    STORED_CHAIN_MAX_TURNS,
    STORED_RESPONSE_MAX_BYTES,
    Gateway,
)
from .test_responses import MODEL, _thinking_sent

JUNK = 1024 * 1024  # three of these per turn: 3 MB the model never sees
TURNS = 6


async def _stored_bytes(gateway: Gateway, secret: str) -> tuple[int, int]:
    """(rows, bytes) the store keeps for the key of ``secret``: every bytea column of its rows,
    whatever the table's columns are."""
    conn = await asyncpg.connect(gateway.database_url)
    try:
        key_id = await _key_id(conn, secret)
        rows = await conn.fetch("SELECT * FROM stored_responses WHERE key_id = $1", key_id)
    finally:
        await conn.close()
    total = sum(len(v) for row in rows for v in row.values() if isinstance(v, bytes))
    return len(rows), total


async def _key_id(conn: asyncpg.Connection, secret: str) -> str:
    found = await conn.fetchval("SELECT id FROM api_keys WHERE key_hash = $1", db.hash_key(secret))
    assert found is not None
    return str(found)


async def test_a_chain_with_junk_stores_what_the_model_saw_linearly(
    gateway: Gateway, new_key: Any
) -> None:
    """Each turn carries 3 MB of unknown fields and dropped items; today's rows keep only the
    turns the translation used, each its own: the sum stays under TURNS x 64 KiB (it was one
    18 MB row, 63 MB in all, re-written every turn)."""
    secret = await new_key("junk-chain")
    client = gateway.openai(api_key=secret)
    previous: str | None = None
    for turn in range(TURNS):
        resp = await client.responses.create(
            model=MODEL,
            input=[
                {"role": "user", "content": f"turn {turn}: say ok", "junk": "j" * JUNK},
                {"type": "reasoning", "id": "rs_junk", "summary": [], "junk": "r" * JUNK},
            ],
            previous_response_id=previous,
            max_output_tokens=64,
            extra_body={"junk_field": "x" * JUNK},
        )
        previous = resp.id
    sent = (await gateway.sent_for(resp))["body"]
    text = str(sent["messages"])
    assert all(f"turn {n}: say ok" in text for n in range(TURNS)) and "jjjj" not in text
    rows, stored = await _stored_bytes(gateway, secret)
    assert rows == TURNS
    assert stored < TURNS * 64 * 1024, stored


async def test_a_turn_larger_than_a_stored_response_may_be_is_refused_before_upstream(
    gateway: Gateway,
) -> None:
    client = gateway.openai()
    big = "b" * (STORED_RESPONSE_MAX_BYTES + 1024 * 1024)
    with pytest.raises(openai.BadRequestError) as err:
        await client.responses.create(model=MODEL, input=big, max_output_tokens=16)
    body: Any = err.value.body
    assert body["param"] == "store" and body["code"] == "stored_response_too_large"
    assert "translator.stored_response_max_bytes" in body["message"]
    assert "store: false" in body["message"]
    # The same turn without storing runs.
    resp = await client.responses.create(model=MODEL, input=big, max_output_tokens=16, store=False)
    assert resp.status == "completed"


async def test_a_key_past_its_stored_bytes_is_refused(gateway: Gateway, new_key: Any) -> None:
    secret = await new_key("full-store")
    client = gateway.openai(api_key=secret)
    conn = await asyncpg.connect(gateway.database_url)
    try:
        key_id = await _key_id(conn, secret)
        # What the key stored before: the store's account of a full key (1 GiB by default),
        # written as the store writes a row's size, without writing a gigabyte here.
        await conn.execute(
            "INSERT INTO stored_responses (key_id, id, model, expires_at, turns, response, size)"
            " VALUES ($1, $2, 'm', now() + interval '1 day', '\\x5b5d', '\\x7b7d', $3)",
            key_id,
            f"resp_{uuid.uuid4().hex}",
            1024**3,
        )
        with pytest.raises(openai.BadRequestError) as err:
            await client.responses.create(model=MODEL, input="Say hi.", max_output_tokens=16)
        body: Any = err.value.body
        assert body["code"] == "stored_responses_quota_exceeded" and body["param"] == "store"
        assert "delete old responses" in body["message"]
        assert "translator.stored_bytes_per_key" in body["message"]
        ok = await client.responses.create(
            model=MODEL, input="Say hi.", max_output_tokens=16, store=False
        )
        assert ok.status == "completed"
    finally:
        await conn.close()


async def test_a_reused_request_id_gives_two_responses(gateway: Gateway) -> None:
    client = gateway.openai()
    rid = f"reused-{uuid.uuid4().hex}"
    one = await client.responses.create(
        model=MODEL, input="Say one.", extra_headers={"x-request-id": rid}
    )
    two = await client.responses.create(
        model=MODEL, input="Say two.", extra_headers={"x-request-id": rid}
    )
    assert one.id != two.id
    assert one.output[0].id != two.output[0].id  # item ids are the request's uid's too
    assert one._request_id == two._request_id == rid
    assert (await client.responses.retrieve(one.id)).model_dump() == one.model_dump()
    assert (await client.responses.retrieve(two.id)).model_dump() == two.model_dump()


BAD_IDS = ["resp_a\x00b", "resp_" + "a" * 300, "msg_" + uuid.uuid4().hex, "resp_a\x01b"]


@pytest.mark.parametrize("bad", BAD_IDS, ids=["nul", "overlong", "prefix", "control"])
async def test_a_malformed_id_is_a_404_everywhere(
    gateway: Gateway, http: aiohttp.ClientSession, bad: str
) -> None:
    url = f"{gateway.url}/openai/v1/responses/{quote(bad, safe='')}"
    headers = {"authorization": f"Bearer {gateway.key}"}
    missing = f"{gateway.url}/openai/v1/responses/resp_{uuid.uuid4().hex}"
    async with http.get(missing, headers=headers) as r:
        never: Any = (await r.json())["error"]
    for method in ("GET", "DELETE"):
        async with http.request(method, url, headers=headers) as r:
            assert r.status == 404, (method, await r.text())
            assert "retry-after" not in r.headers
            error = (await r.json())["error"]
            # The same answer as for a well-formed id never stored, but for the id it names.
            assert "found for this API key" in error["message"]
            assert error["message"].split("; ", 1)[1] == never["message"].split("; ", 1)[1]
            assert (error["type"], error["code"]) == (never["type"], never["code"])
    with pytest.raises(openai.NotFoundError) as err:
        await gateway.openai().responses.create(
            model=MODEL, input="hi", previous_response_id=bad, max_output_tokens=16
        )
    body: Any = err.value.body
    assert body["code"] == "previous_response_not_found"
    assert body["param"] == "previous_response_id"


def _forged(kid: str) -> str:
    """A well-made blob under a key the gateway never had."""
    [key] = parse_keys(new_key_entry(kid))
    return Sealer([key]).seal("whoever", [{"type": "thinking", "thinking": "x", "signature": "s"}])


async def test_an_unknown_seal_key_is_refused_and_a_retired_one_dropped(gateway: Gateway) -> None:
    client = gateway.openai()

    def items(blob: str) -> list[Any]:
        reasoning = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": blob}
        return [
            {"role": "user", "content": "Say hi."},
            {"role": "assistant", "content": [{"type": "output_text", "text": "Hi."}]},
            {"role": "user", "content": "Again."},
            reasoning,
            {"role": "assistant", "content": [{"type": "output_text", "text": "Hi again."}]},
            {"role": "user", "content": "Once more."},
        ]

    with pytest.raises(openai.BadRequestError) as err:
        await client.responses.create(
            model=MODEL, input=items(_forged(f"forged-{secrets.token_hex(4)}")), store=False
        )
    body: Any = err.value.body
    assert body["param"] == "input[3].encrypted_content"
    assert body["message"].startswith("input[3].encrypted_content: ")
    resp = await client.responses.create(
        model=MODEL, input=items(_forged(RETIRED_SEAL_KEY)), store=False, max_output_tokens=32
    )
    assert resp.status == "completed"
    assert _thinking_sent((await gateway.sent_for(resp))["body"]) == []


async def test_a_stored_conversation_counts_in_the_keys_tpm_and_is_billed(
    gateway: Gateway, new_key: Any
) -> None:
    """The edge counts the body; the conversation previous_response_id adds is counted by the
    translator in the same window: a long answer, continued with a short body, is refused."""
    tpm = 1000
    secret = await new_key("tpm-chain", tpm=tpm)
    client = gateway.openai(api_key=secret)
    # A short request (about 20 tokens of body) whose answer is about 3,000 tokens.
    long = await client.responses.create(
        model=MODEL, input="Talk. [sim:tokens=3000]", max_output_tokens=4000
    )
    assert long.usage is not None and long.usage.output_tokens >= 3000
    with pytest.raises(openai.RateLimitError) as err:
        await client.responses.create(
            model=MODEL, input="Go on.", previous_response_id=long.id, max_output_tokens=16
        )
    headers = err.value.response.headers
    assert int(headers["retry-after"]) >= 1
    assert headers["x-ratelimit-limit-tokens"] == str(tpm)
    body: Any = err.value.body
    assert "previous_response_id" in body["message"] and f"{tpm} input tokens" in body["message"]
    # Without a tpm the same continuation runs, and its conversation is billed as input.
    free = gateway.openai()
    first = await free.responses.create(
        model=MODEL, input="Talk. [sim:tokens=600]", max_output_tokens=1000
    )
    then = await free.responses.create(
        model=MODEL, input="Go on.", previous_response_id=first.id, max_output_tokens=16
    )
    assert first.usage is not None and then.usage is not None
    assert then.usage.input_tokens > first.usage.output_tokens
    assert then._request_id is not None
    row = await gateway.usage_row(then._request_id)
    assert row is not None and row["input_tokens"] == then.usage.input_tokens


async def test_a_conversation_past_its_turns_or_bytes_is_refused(gateway: Gateway) -> None:
    client = gateway.openai()
    previous: str | None = None
    for turn in range(STORED_CHAIN_MAX_TURNS):
        resp = await client.responses.create(
            model=MODEL, input=f"Turn {turn}.", previous_response_id=previous, max_output_tokens=8
        )
        previous = resp.id
    with pytest.raises(openai.BadRequestError) as err:
        await client.responses.create(
            model=MODEL, input="One more.", previous_response_id=previous, max_output_tokens=8
        )
    body: Any = err.value.body
    assert body["param"] == "previous_response_id" and body["code"] == "previous_response_too_long"
    assert "translator.stored_chain_max_turns" in body["message"]
    # Bytes: two turns under the per-response limit whose sum passes the conversation's.
    part = "p" * (STORED_CHAIN_MAX_BYTES // 2 + 64 * 1024)
    assert len(part) < STORED_RESPONSE_MAX_BYTES
    first = await client.responses.create(model=MODEL, input=part, max_output_tokens=8)
    second = await client.responses.create(
        model=MODEL, input=part, previous_response_id=first.id, max_output_tokens=8
    )
    with pytest.raises(openai.BadRequestError) as err:
        await client.responses.create(
            model=MODEL, input="Go on.", previous_response_id=second.id, max_output_tokens=8
        )
    body = err.value.body
    assert body["code"] == "previous_response_too_long"
    assert "translator.stored_chain_max_bytes" in body["message"]


async def test_a_deleted_response_inside_a_conversation_still_carries_it(
    gateway: Gateway,
) -> None:
    """Deleting a response hides it (404), but a later response continuing it keeps its
    conversation, as when each response held a copy of it."""
    client = gateway.openai()
    first = await client.responses.create(model=MODEL, input="Remember 4711.", max_output_tokens=8)
    second = await client.responses.create(
        model=MODEL, input="And 42.", previous_response_id=first.id, max_output_tokens=8
    )
    await client.responses.delete(first.id)
    with pytest.raises(openai.NotFoundError):
        await client.responses.retrieve(first.id)
    third = await client.responses.create(
        model=MODEL, input="Both?", previous_response_id=second.id, max_output_tokens=8
    )
    assert "Remember 4711." in str((await gateway.sent_for(third))["body"]["messages"])


async def test_a_response_stored_before_turns_is_served_but_not_continued(
    gateway: Gateway,
) -> None:
    """A row of migration 0005 (whole history, no turns): GET returns it; a continuation is a
    404 that says to send the items (its history is not read as turns)."""
    conn = await asyncpg.connect(gateway.database_url)
    old = f"resp_old-{uuid.uuid4().hex}"
    response = {"id": old, "object": "response", "status": "completed", "output": []}
    try:
        key_id = await _key_id(conn, gateway.key)
        await conn.execute(
            "INSERT INTO stored_responses (key_id, id, model, expires_at, history, response)"
            " VALUES ($1, $2, $3, now() + interval '1 day', $4, $5)",
            key_id,
            old,
            MODEL,
            b'[{"type": "message", "role": "user", "content": "hi"}]',
            json.dumps(response).encode(),
        )
    finally:
        await conn.close()
    client = gateway.openai()
    got = await client.responses.with_raw_response.retrieve(old)
    assert json.loads(got.text) == response
    with pytest.raises(openai.NotFoundError) as err:
        await client.responses.create(model=MODEL, input="again", previous_response_id=old)
    body: Any = err.value.body
    assert body["code"] == "previous_response_not_found"
    assert "send the conversation's items in input" in body["message"]
