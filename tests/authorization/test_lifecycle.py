"""Expiry and rotation (docs/tenancy.md, "How a request is authorized"): checked on every request
from the key the edge caches (the cache's TTL here is far longer than the tests), on the wall
clock: a key past its expires_at is 401 saying when it expired; a secret a rotation replaced
works during the overlap, then is 401 saying it was rotated."""

from __future__ import annotations

import asyncio
import datetime
import time

import anthropic
import pytest
from ezat_common import db
from ezat_common.tenancy import rfc3339

from .conftest import Authz

HI = [{"role": "user", "content": "hi"}]


async def works(authz: Authz, secret: str, edge: int = 0) -> bool:
    async with authz.anthropic(secret, edge) as client:
        await client.messages.count_tokens(model="claude-instant", messages=HI)  # type: ignore[arg-type]
    return True


async def refusal(authz: Authz, secret: str, edge: int = 0) -> anthropic.AuthenticationError:
    with pytest.raises(anthropic.AuthenticationError) as caught:
        await works(authz, secret, edge)
    return caught.value


def at(seconds_from_now: float) -> datetime.datetime:
    """A moment to the second (what RFC 3339 in the message shows)."""
    moment = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=seconds_from_now)
    return moment.replace(microsecond=0)


async def test_a_key_is_refused_from_its_expiry_on_although_cached(authz: Authz) -> None:
    expires = at(3)
    _, secret = await authz.key(expires_at=expires)
    assert await works(authz, secret)  # cached from now on
    await asyncio.sleep(max(0.0, expires.timestamp() - time.time()) + 0.2)
    err = await refusal(authz, secret)
    assert err.status_code == 401
    assert err.body["error"] == {  # type: ignore[index]
        "type": "authentication_error",
        "message": f"this API key expired at {rfc3339(expires.timestamp())}; "
        "ask an operator for a new one",
    }


async def test_a_key_created_expired_is_refused_on_every_endpoint(authz: Authz) -> None:
    expires = at(-60)
    _, secret = await authz.key(expires_at=expires)
    async with authz.anthropic(secret) as ac, authz.openai(secret) as oc:
        for call in (
            ac.models.list(),
            oc.models.list(),
            oc.chat.completions.create(model="gpt-sim", messages=HI),  # type: ignore[arg-type]
            ac.messages.create(model="claude-instant", max_tokens=8, messages=HI),  # type: ignore[arg-type]
        ):
            with pytest.raises((anthropic.AuthenticationError, Exception)) as caught:
                await call
            assert getattr(caught.value, "status_code", None) == 401
            assert rfc3339(expires.timestamp()) in str(caught.value)


async def test_a_rotated_secret_works_for_its_overlap_then_says_it_was_rotated(
    authz: Authz,
) -> None:
    key_id, old = await authz.key()
    assert await works(authz, old) and await works(authz, old, edge=1)  # cached on both edges
    new = db.new_secret()
    until = at(3)
    # What a rotation with a 3 s overlap writes, and broadcasts.
    await authz.sql(
        "UPDATE api_keys SET previous_key_hash = key_hash, previous_valid_until = $2,"
        " key_hash = $3, prefix = $4 WHERE id = $1",
        key_id,
        until,
        db.hash_key(new),
        new[:12],
    )
    await authz.changed(key=key_id)
    await asyncio.sleep(0.3)
    for edge in (0, 1):
        assert await works(authz, new, edge)
        assert await works(authz, old, edge)  # the overlap
    await asyncio.sleep(max(0.0, until.timestamp() - time.time()) + 0.2)
    for edge in (0, 1):
        assert await works(authz, new, edge)
        err = await refusal(authz, old, edge)
        assert err.body["error"]["message"] == (  # type: ignore[index]
            f"this API key was rotated: the secret presented stopped working at "
            f"{rfc3339(until.timestamp())}; use the key's new secret (ask an operator for it)"
        )
