"""Rotation with an overlap, revocation and the broadcast that tells every edge, through the
real stack and the official Anthropic SDK."""

from __future__ import annotations

import asyncio
import time

import anthropic
import msgspec
import nats
import pytest
from ezat_common.subjects import Subjects
from ezat_common.tenancy import Changed
from nats.aio.msg import Msg
from support.config import SONNET

from .conftest import AUTH_CACHE_TTL, Admin

SUBJECTS = Subjects(prefix="adm")


async def works(admin: Admin, secret: str) -> bool:
    """Whether a model call with ``secret`` is let in (401 otherwise)."""
    async with admin.stack.anthropic(secret) as client:
        try:
            await client.messages.count_tokens(
                model=SONNET, messages=[{"role": "user", "content": "hi"}]
            )
        except anthropic.AuthenticationError:
            return False
    return True


async def refused_within(admin: Admin, secret: str, seconds: float) -> float:
    """Seconds until ``secret`` is refused; fails past ``seconds``."""
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        if not await works(admin, secret):
            return time.monotonic() - start
        await asyncio.sleep(0.1)
    raise AssertionError(f"still accepted after {seconds} s")


async def test_rotation_keeps_the_old_secret_for_the_overlap_only(admin: Admin) -> None:
    made = await admin.ok("POST", "/keys", {"name": "rotating"})
    old = made["key"]
    assert await works(admin, old)
    rotated = await admin.ok("POST", f"/keys/{made['id']}/rotate", {"overlap_seconds": 2})
    new = rotated["key"]
    started = time.monotonic()
    assert new != old and new.startswith("ezat_sk_") and rotated["prefix"] == new[:12]
    assert rotated["id"] == made["id"]
    assert await works(admin, new)
    assert await works(admin, old)  # within the overlap
    waited = await refused_within(admin, old, 2 + AUTH_CACHE_TTL + 4)
    assert time.monotonic() - started >= 1.5, "the old secret ended before its overlap"
    assert waited >= 0
    assert await works(admin, new)
    shown = await admin.ok("GET", f"/keys/{made['id']}")
    assert "key" not in shown and shown["prefix"] == new[:12]


async def test_rotation_without_overlap_ends_the_old_secret(admin: Admin) -> None:
    made = await admin.ok("POST", "/keys", {"name": "rotating-now"})
    assert await works(admin, made["key"])
    rotated = await admin.ok("POST", f"/keys/{made['id']}/rotate")
    await refused_within(admin, made["key"], AUTH_CACHE_TTL + 3)
    assert await works(admin, rotated["key"])
    # Refused as rotated, saying so, rather than as an unknown key.
    async with admin.stack.anthropic(made["key"]) as client:
        with pytest.raises(anthropic.AuthenticationError, match="was rotated"):
            await client.messages.count_tokens(
                model=SONNET, messages=[{"role": "user", "content": "hi"}]
            )


async def test_revoke_refuses_the_next_request(admin: Admin) -> None:
    made = await admin.ok("POST", "/keys", {"name": "to-revoke"})
    assert await works(admin, made["key"])  # cached by the edge now
    revoked = await admin.ok("POST", f"/keys/{made['id']}/revoke")
    assert revoked["revoked_at"] is not None
    async with admin.stack.anthropic(made["key"]) as client:
        with pytest.raises(anthropic.AuthenticationError):
            await client.messages.create(
                model=SONNET, max_tokens=8, messages=[{"role": "user", "content": "hi"}]
            )


async def test_writes_are_broadcast_to_every_edge(admin: Admin, nats_url: str) -> None:
    heard: list[tuple[str, bytes]] = []
    nc = await nats.connect(nats_url)

    async def on(msg: Msg) -> None:
        heard.append((msg.subject, msg.data))

    try:
        await nc.subscribe(SUBJECTS.keys_changed, cb=on)
        await nc.subscribe(SUBJECTS.keys_revoked, cb=on)
        await nc.flush()
        team = await admin.ok("POST", "/teams", {"name": f"bc-{time.monotonic_ns()}"})
        made = await admin.ok("POST", "/keys", {"name": "bc", "team": team["id"]})
        await admin.ok("PATCH", f"/teams/{team['id']}", {"rpm": 3})
        await admin.ok("PATCH", f"/keys/{made['id']}", {"rpm": 3})
        await admin.ok("POST", f"/keys/{made['id']}/rotate", {"overlap_seconds": 0})
        await admin.ok("POST", f"/keys/{made['id']}/revoke")
        for _ in range(100):
            if len(heard) >= 7:
                break
            await asyncio.sleep(0.05)
    finally:
        await nc.close()
    changed = [msgspec.json.decode(d, type=Changed) for s, d in heard if s == SUBJECTS.keys_changed]
    assert changed == [
        Changed(team=team["id"]),  # created
        Changed(key=made["id"]),  # created
        Changed(team=team["id"]),
        Changed(key=made["id"]),
        Changed(key=made["id"]),
        Changed(key=made["id"]),
    ]
    assert (SUBJECTS.keys_revoked, made["id"].encode()) in heard
