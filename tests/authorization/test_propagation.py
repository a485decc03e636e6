"""Changes reach every edge within 5 s without a restart (docs/tenancy.md, "How a request is
authorized"): an admin write is an UPDATE plus the ``keys_changed`` broadcast (a revocation:
``keys_revoked``); the second edge, which cached the key before (its cache TTL is far past the
test), applies it within 5 s."""

from __future__ import annotations

import datetime

import anthropic
import openai

from .conftest import MODELS, Authz, eventually

HI = [{"role": "user", "content": "hi"}]
SONNET, INSTANT = MODELS[0], MODELS[1]


async def status_of(authz: Authz, secret: str, model: str = INSTANT, edge: int = 1) -> int:
    try:
        async with authz.anthropic(secret, edge) as client:
            await client.messages.count_tokens(model=model, messages=HI)  # type: ignore[arg-type]
    except anthropic.APIStatusError as exc:
        return exc.status_code
    return 200


async def listed(authz: Authz, secret: str, edge: int = 1) -> set[str]:
    async with authz.openai(secret, edge) as client:
        return {m.id async for m in client.models.list()}


async def test_a_key_models_change_reaches_the_second_edge(authz: Authz) -> None:
    key_id, secret = await authz.key()
    assert await status_of(authz, secret, SONNET) == 200
    assert await listed(authz, secret) == set(MODELS)
    await authz.sql("UPDATE api_keys SET models = $2 WHERE id = $1", key_id, [INSTANT])
    await authz.changed(key=key_id)

    async def applied() -> bool:
        return await status_of(authz, secret, SONNET) == 404

    await eventually(applied)
    assert await listed(authz, secret) == {INSTANT}
    assert await status_of(authz, secret, INSTANT) == 200


async def test_a_team_change_reaches_every_key_of_the_team(authz: Authz) -> None:
    team = await authz.team()
    keys = [await authz.key(team=team) for _ in range(2)]
    for _, secret in keys:
        assert await listed(authz, secret) == set(MODELS)
    await authz.sql("UPDATE teams SET models = $2 WHERE id = $1", team, [SONNET])
    await authz.changed(team=team)
    for _, secret in keys:

        async def applied(secret: str = secret) -> bool:
            return await listed(authz, secret) == {SONNET}

        await eventually(applied)


async def test_an_rpm_change_reaches_the_second_edge(authz: Authz) -> None:
    key_id, secret = await authz.key()
    for _ in range(3):
        assert await status_of(authz, secret) == 200
    await authz.sql("UPDATE api_keys SET rpm = 0 WHERE id = $1", key_id)
    await authz.changed(key=key_id)

    async def applied() -> bool:
        return await status_of(authz, secret) == 429

    await eventually(applied)


async def test_an_expiry_set_later_reaches_the_second_edge(authz: Authz) -> None:
    key_id, secret = await authz.key()
    assert await status_of(authz, secret) == 200
    past = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=1)
    await authz.sql("UPDATE api_keys SET expires_at = $2 WHERE id = $1", key_id, past)
    await authz.changed(key=key_id)

    async def applied() -> bool:
        return await status_of(authz, secret) == 401

    await eventually(applied)


async def test_a_revocation_reaches_the_second_edge(authz: Authz) -> None:
    key_id, secret = await authz.key()
    for edge in (0, 1):
        assert await status_of(authz, secret, edge=edge) == 200
    await authz.revoked(key_id)

    async def applied() -> bool:
        return all([await status_of(authz, secret, edge=edge) == 401 for edge in (0, 1)])

    await eventually(applied)
    try:
        async with authz.openai(secret, 1) as client:
            await client.models.list()
        raise AssertionError("a revoked key listed models")
    except openai.AuthenticationError as exc:
        assert "revoked" in str(exc)
