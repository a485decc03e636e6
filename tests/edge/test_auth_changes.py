"""auth.py and a change broadcast (docs/tenancy.md, "How a request is authorized"): what a
``tenancy.Changed`` names turns stale and is looked up again on its next use, on a real
PostgreSQL; while the database cannot answer the stale entry is served as it was, and a revoked
one stays revoked. Expiry is checked per request from the cached key."""

from __future__ import annotations

import datetime
from collections.abc import AsyncIterator

import asyncpg
import msgspec
import pytest
from aiohttp.test_utils import make_mocked_request
from ezat_common import db
from ezat_common.errors import GatewayError
from ezat_common.tenancy import Changed
from ezat_edge.auth import Authenticator

TTL = 600.0  # past the test: only a change makes an entry stale


@pytest.fixture
async def auth(database_url: str) -> AsyncIterator[Authenticator]:
    authenticator = Authenticator(TTL)
    authenticator.pool = await asyncpg.create_pool(database_url, min_size=1, max_size=2)
    try:
        yield authenticator
    finally:
        await authenticator.pool.close()


def presenting(secret: str):  # type: ignore[no-untyped-def]
    return make_mocked_request("GET", "/v1/models", headers={"x-api-key": secret})


async def sql(auth: Authenticator, query: str, *args: object) -> None:
    assert auth.pool is not None
    await auth.pool.execute(query, *args)


async def new_key(auth: Authenticator, team: str | None = None) -> tuple[str, str]:
    assert auth.pool is not None
    async with auth.pool.acquire() as conn:
        key, secret = await db.create_key(conn, "changes", team_id=team)
    return key.id, secret


async def test_a_change_is_looked_up_again_and_others_stay_cached(auth: Authenticator) -> None:
    changed_id, changed = await new_key(auth)
    other_id, other = await new_key(auth)
    assert (await auth.authenticate(presenting(changed))).rpm is None
    await auth.authenticate(presenting(other))
    for key_id in (changed_id, other_id):
        await sql(auth, "UPDATE api_keys SET rpm = 7 WHERE id = $1", key_id)
    auth.heard_change(msgspec.json.encode(Changed(key=changed_id)), "test")
    assert (await auth.authenticate(presenting(changed))).rpm == 7
    assert (await auth.authenticate(presenting(other))).rpm is None  # not named: still cached


async def test_a_team_change_makes_every_key_of_the_team_stale(auth: Authenticator) -> None:
    team = "team_changes_" + datetime.datetime.now().strftime("%H%M%S%f")
    await sql(auth, "INSERT INTO teams (id, name) VALUES ($1, $1)", team)
    keys = [await new_key(auth, team), await new_key(auth, team)]
    for _, secret in keys:
        assert (await auth.authenticate(presenting(secret))).team_rpm is None
    await sql(auth, "UPDATE teams SET rpm = 3 WHERE id = $1", team)
    assert auth.changed(team_id=team) == 2
    for _, secret in keys:
        assert (await auth.authenticate(presenting(secret))).team_rpm == 3


async def test_with_the_database_away_a_changed_key_is_unavailable_and_revoked_stays_revoked(
    auth: Authenticator,
) -> None:
    """A change may take rights away (a rotation, an earlier expiry, fewer models): while the
    database cannot answer, a changed key is a 503, never served with the rights it had; one
    nothing changed is served stale; a revoked one stays refused."""
    kept_id, kept = await new_key(auth)
    changed_id, changed = await new_key(auth)
    revoked_id, revoked = await new_key(auth)
    for secret in (kept, changed, revoked):
        await auth.authenticate(presenting(secret))
    auth.evict(revoked_id)  # the keys_revoked broadcast
    auth.changed(key_id=changed_id)
    auth.changed(key_id=revoked_id)
    auth.missed_broadcasts()  # kept: stale, as after a reconnect
    pool, auth.pool = auth.pool, None  # the database cannot be asked
    try:
        assert (await auth.authenticate(presenting(kept))).id == kept_id
        for secret, status in ((changed, 503), (revoked, 503)):
            with pytest.raises(GatewayError) as caught:
                await auth.authenticate(presenting(secret))
            assert caught.value.status == status
    finally:
        auth.pool = pool
    with pytest.raises(GatewayError) as refused:
        await auth.authenticate(presenting(revoked))
    assert refused.value.status == 401


async def test_an_undecodable_change_is_dropped(auth: Authenticator) -> None:
    key_id, secret = await new_key(auth)
    await auth.authenticate(presenting(secret))
    await sql(auth, "UPDATE api_keys SET rpm = 1 WHERE id = $1", key_id)
    auth.heard_change(b"not json", "test")
    assert (await auth.authenticate(presenting(secret))).rpm is None


async def test_expiry_is_checked_per_request_from_the_cached_key(auth: Authenticator) -> None:
    key_id, secret = await new_key(auth)
    await auth.authenticate(presenting(secret))
    # Changed in the database without a broadcast: the cached key has no expiry yet.
    await sql(auth, "UPDATE api_keys SET expires_at = now() - interval '1 s' WHERE id = $1", key_id)
    await auth.authenticate(presenting(secret))
    auth.changed(key_id=key_id)
    with pytest.raises(GatewayError) as caught:
        await auth.authenticate(presenting(secret))
    assert caught.value.status == 401
    assert "expired at" in str(caught.value)


async def test_a_lookup_that_read_the_row_before_a_revocation_is_stored_revoked(
    auth: Authenticator,
) -> None:
    _, secret = await new_key(auth)
    key_id = (await auth.authenticate(presenting(secret))).id
    auth._cache.clear()  # as if the entry had expired: the next use looks the key up
    auth.evict(key_id)  # heard while the row still read as it was (not revoked in SQL here)
    with pytest.raises(GatewayError) as caught:
        await auth.authenticate(presenting(secret))
    assert "revoked" in str(caught.value)


async def test_after_a_reconnect_every_cached_key_is_looked_up_again(auth: Authenticator) -> None:
    """A revocation broadcast while the edge's NATS connection was down never arrives: on the
    reconnect (bus.connect's on_reconnected) every cached key turns stale, so the revocation the
    database holds is what the next request sees."""
    revoked_id, revoked = await new_key(auth)
    changed_id, changed = await new_key(auth)
    await auth.authenticate(presenting(revoked))
    await auth.authenticate(presenting(changed))
    await sql(auth, "UPDATE api_keys SET revoked_at = now() WHERE id = $1", revoked_id)
    await sql(auth, "UPDATE api_keys SET rpm = 3 WHERE id = $1", changed_id)
    assert (await auth.authenticate(presenting(changed))).rpm is None  # cached: nothing heard
    assert auth.missed_broadcasts() == 2
    with pytest.raises(GatewayError) as refused:
        await auth.authenticate(presenting(revoked))
    assert refused.value.status == 401
    assert (await auth.authenticate(presenting(changed))).rpm == 3
