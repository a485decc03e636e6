"""Allow-lists on every surface (docs/tenancy.md, "How a request is authorized"): over random
key and team model lists, through the real stack and the official SDKs, a model the key may use
answers on both Messages endpoints and both OpenAI APIs, any other is exactly the unknown
model's 404, and both model listings are the allowed set (within the catalogue)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import anthropic
import openai
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from .conftest import ALIASES, MODELS, Authz

GHOST = "anthropic/ghost-model"  # no model has this name
HI = [{"role": "user", "content": "hi"}]
# Names an operator may put in a list: ids, aliases, and one no model has.
LISTABLE = [*MODELS, *(a for names in ALIASES.values() for a in names), "anthropic/retired"]
CANONICAL = {name: m for m in MODELS for name in (m, *ALIASES[m])}

lists = st.none() | st.lists(st.sampled_from(LISTABLE), max_size=5, unique=True)
spellings = st.tuples(*(st.sampled_from([m, *ALIASES[m]]) for m in MODELS))


def allowed(own: list[str] | None, team: list[str] | None) -> set[str]:
    """What the key may use: each list's models (within the catalogue), intersected."""
    result = set(MODELS)
    for names in (own, team):
        if names is not None:
            result &= {CANONICAL[n] for n in names if n in CANONICAL}
    return result


def same(body: Any) -> str:
    """An error body as compared: all but the request's own id (Anthropic's request_id)."""
    if isinstance(body, dict):
        body = {k: v for k, v in body.items() if k != "request_id"}
    return json.dumps(body, sort_keys=True)


async def call(gw: Authz, secret: str, endpoint: str, name: str) -> tuple[int, Any]:
    """(200, None) when the call answered, else (status, error body)."""
    try:
        async with gw.anthropic(secret) as ac, gw.openai(secret) as oc:
            if endpoint == "messages":
                await ac.messages.create(model=name, max_tokens=16, messages=HI)  # type: ignore[arg-type]
            elif endpoint == "count_tokens":
                await ac.messages.count_tokens(model=name, messages=HI)  # type: ignore[arg-type]
            elif endpoint == "chat":
                await oc.chat.completions.create(model=name, max_tokens=16, messages=HI)  # type: ignore[arg-type]
            else:
                await oc.responses.create(model=name, input="hi", max_output_tokens=16, store=False)
    except (anthropic.APIStatusError, openai.APIStatusError) as exc:
        return exc.status_code, exc.body
    return 200, None


async def listings(gw: Authz, secret: str) -> tuple[set[str], set[str]]:
    async with gw.anthropic(secret) as ac, gw.openai(secret) as oc:
        a = {m.id async for m in ac.models.list()}
        o = {m.id async for m in oc.models.list()}
    return a, o


ENDPOINTS = ("messages", "count_tokens", "chat", "responses")


@settings(
    max_examples=12,
    deadline=None,
    # Every example runs on the real stack: a failure is reported as found, not shrunk for minutes.
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(own=lists, team=lists, in_team=st.booleans(), spelled=spellings)
async def test_only_allowed_models_answer_and_are_listed(
    authz: Authz,
    own: list[str] | None,
    team: list[str] | None,
    in_team: bool,
    spelled: tuple[str, ...],
) -> None:
    team_id = await authz.team(models=team) if in_team else None
    _, secret = await authz.key(team=team_id, models=own)
    may = allowed(own, team if in_team else None)
    names = [*spelled, GHOST]
    calls = [(e, n) for e in ENDPOINTS for n in names]
    answers = await asyncio.gather(*(call(authz, secret, e, n) for e, n in calls))
    unknown = {e: a for (e, n), a in zip(calls, answers, strict=True) if n == GHOST}
    for (endpoint, name), (status, body) in zip(calls, answers, strict=True):
        if name != GHOST and CANONICAL[name] in may:
            assert status == 200, (endpoint, name, body)
            continue
        # Exactly the unknown model's answer, but for the name.
        ghost_status, ghost_body = unknown[endpoint]
        assert ghost_status == status == 404, (endpoint, name, body)
        assert same(body) == same(ghost_body).replace(GHOST, name), (endpoint, name)
    assert await listings(authz, secret) == (may, may)


async def test_a_continuation_and_a_stored_response_of_a_model_no_longer_allowed(
    authz: Authz,
) -> None:
    """A stored response made with a model the key may no longer use: a continuation of it is
    that model's unknown-model 404, a GET of it the 404 of a response never stored; the key
    may still DELETE it."""
    instant, sonnet = "anthropic/claude-instant-sim", MODELS[0]
    key_id, secret = await authz.key(models=[instant, sonnet])
    async with authz.openai(secret) as oc:
        first = await oc.responses.create(model=instant, input="hi", max_output_tokens=16)
        later = await oc.responses.create(
            model=sonnet, input="again", max_output_tokens=16, previous_response_id=first.id
        )
        await authz.sql("UPDATE api_keys SET models = $2 WHERE id = $1", key_id, [sonnet])
        await authz.changed(key=key_id)
        await asyncio.sleep(0.5)
        try:
            await oc.responses.create(
                model=sonnet, input="more", max_output_tokens=16, previous_response_id=first.id
            )
            raise AssertionError("a continuation of a model no longer allowed answered")
        except openai.NotFoundError as exc:
            continued = exc.body
        try:
            await oc.responses.create(model=instant, input="x", max_output_tokens=16)
            raise AssertionError("a model no longer allowed answered")
        except openai.NotFoundError as exc:
            direct = exc.body
        assert same(continued) == same(direct)
        # Its own model is still allowed: it continues, and is shown.
        await oc.responses.create(
            model=sonnet, input="more", max_output_tokens=16, previous_response_id=later.id
        )
        assert (await oc.responses.retrieve(later.id)).id == later.id
        try:
            await oc.responses.retrieve(first.id)
            raise AssertionError("a stored response of a model no longer allowed was shown")
        except openai.NotFoundError as exc:
            hidden = exc.body
        try:
            await oc.responses.retrieve("resp_" + "0" * 32)
            raise AssertionError("a response never stored was found")
        except openai.NotFoundError as exc:
            never = exc.body
        assert same(hidden) == same(never).replace("resp_" + "0" * 32, first.id)
        await oc.responses.delete(first.id)  # its own data: the key may still erase it
