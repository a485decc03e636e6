"""The audit log of /admin/v1 (docs/tenancy.md, "Audit log"): an entry per write with actor,
action, target, before and after, a hash chain that verifies, a tampered row named by its seq,
and no secret anywhere in it."""

from __future__ import annotations

import uuid

import asyncpg
from ezat_common import audit, tenancy_store

from .conftest import Admin


async def rows(database_url: str) -> list[audit.Entry]:
    conn = await asyncpg.connect(database_url)
    try:
        return await tenancy_store.audit_entries(conn)
    finally:
        await conn.close()


async def test_every_write_is_audited_in_a_chain_that_verifies(admin: Admin) -> None:
    last = await admin.ok("GET", "/audit")
    since = last["data"][-1]["seq"] if last["data"] else 0
    who = {"x-ezat-actor": "alice@example.com"}
    team = await admin.ok(
        "POST", "/teams", {"name": f"audited-{uuid.uuid4().hex[:6]}"}, headers=who
    )
    await admin.ok("PATCH", f"/teams/{team['id']}", {"rpm": 9})
    made = await admin.ok("POST", "/keys", {"name": "a", "team": team["id"]}, headers=who)
    await admin.ok("PATCH", f"/keys/{made['id']}", {"budget_usd": 1.5})
    await admin.ok("POST", f"/keys/{made['id']}/rotate", {"overlap_seconds": 60})
    await admin.ok("POST", f"/keys/{made['id']}/revoke")
    await admin.ok("DELETE", f"/teams/{team['id']}")
    # A refused write and a read record nothing.
    assert (await admin.call("POST", "/keys", {"name": "a", "rpm": -1}))[0] == 400
    await admin.ok("GET", "/keys")

    listed = (await admin.ok("GET", "/audit", since=str(since)))["data"]
    actions = [(e["action"], e["target"], e["actor"]) for e in listed]
    assert actions == [
        ("team.create", team["id"], "operator:alice@example.com"),
        ("team.update", team["id"], "operator"),
        ("key.create", made["id"], "operator:alice@example.com"),
        ("key.update", made["id"], "operator"),
        ("key.rotate", made["id"], "operator"),
        ("key.revoke", made["id"], "operator"),
        ("team.delete", team["id"], "operator"),
    ]
    create, update = listed[0], listed[1]
    assert create["before"] is None and create["after"]["name"] == team["name"]
    assert (update["before"]["rpm"], update["after"]["rpm"]) == (None, 9)
    assert listed[3]["after"]["budget_usd"] == 1.5 and listed[3]["before"]["budget_usd"] is None
    rotate = listed[4]
    assert rotate["before"]["prefix"] == made["prefix"] != rotate["after"]["prefix"]
    assert listed[6]["after"] is None and listed[6]["before"]["id"] == team["id"]
    seqs = [e["seq"] for e in listed]
    assert seqs == list(range(since + 1, since + 8))

    # The chain over every row, read straight from PostgreSQL, verifies; the API shows the rows.
    stored = await rows(admin.stack.database_url)
    assert audit.verify(stored) == []
    assert [audit.Entry(**e) for e in listed] == stored[since:]
    # since as a time: the entries at or after it.
    by_time = (await admin.ok("GET", "/audit", since=listed[2]["at"]))["data"]
    assert [e["seq"] for e in by_time][:5] == seqs[2:]


async def test_a_tampered_row_is_named_by_its_seq(admin: Admin) -> None:
    team = await admin.ok("POST", "/teams", {"name": f"tamper-{uuid.uuid4().hex[:6]}"})
    await admin.ok("PATCH", f"/teams/{team['id']}", {"budget_usd": 10})
    await admin.ok("PATCH", f"/teams/{team['id']}", {"budget_usd": 20})
    entries = (await admin.ok("GET", "/audit"))["data"]
    target = next(e for e in entries if e["target"] == team["id"] and e["action"] == "team.update")
    conn = await asyncpg.connect(admin.stack.database_url)
    try:
        original = await conn.fetchval("SELECT after FROM audit_log WHERE seq = $1", target["seq"])
        await conn.execute(
            "UPDATE audit_log SET after = jsonb_set(after, '{budget_usd}', '1000000')"
            " WHERE seq = $1",
            target["seq"],
        )
        try:
            assert audit.verify(await tenancy_store.audit_entries(conn)) == [target["seq"]]
        finally:
            await conn.execute(
                "UPDATE audit_log SET after = $2::jsonb WHERE seq = $1", target["seq"], original
            )
        assert audit.verify(await tenancy_store.audit_entries(conn)) == []
    finally:
        await conn.close()


async def test_no_secret_is_in_the_audit_log(admin: Admin) -> None:
    made = await admin.ok("POST", "/keys", {"name": "secretive"})
    rotated = await admin.ok("POST", f"/keys/{made['id']}/rotate", {"overlap_seconds": 1})
    conn = await asyncpg.connect(admin.stack.database_url)
    try:
        dump = await conn.fetchval("SELECT string_agg(audit_log::text, E'\\n') FROM audit_log")
        hashes = await conn.fetchrow(
            "SELECT encode(key_hash, 'hex') AS now, encode(previous_key_hash, 'hex') AS was"
            " FROM api_keys WHERE id = $1",
            made["id"],
        )
    finally:
        await conn.close()
    assert made["id"] in dump
    for secret in (made["key"], rotated["key"], admin.stack.token):
        assert secret not in dump
        assert secret[12:] not in dump  # nor any of it past the shown prefix
    assert hashes["now"] not in dump and hashes["was"] not in dump
    listed = str(await admin.ok("GET", "/audit"))
    assert made["key"] not in listed and rotated["key"] not in listed
