"""Team limits (docs/tenancy.md, "How a request is authorized"): a team's rpm and tpm are shared
by all its keys on every edge (one window per team in Redis); a refusal names the team, with
retry-after and the team window's x-ratelimit headers."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import anthropic
import openai
import pytest

from .conftest import Authz, eventually

HI = [{"role": "user", "content": "hi"}]


async def same_minute(room: float) -> None:
    """Wait, if need be, for a minute window with ``room`` seconds left: the requests of a test
    then count in one window."""
    left = 60 - time.time() % 60
    if left < room:
        await asyncio.sleep(left + 0.1)


async def test_a_teams_rpm_is_shared_by_its_keys_across_two_edges(authz: Authz) -> None:
    team = await authz.team(rpm=3)
    (_, first), (_, second) = await authz.key(team=team), await authz.key(team=team, rpm=100)
    await same_minute(20)
    spread = [(first, 0), (second, 1), (first, 1)]
    for secret, edge in spread:
        async with authz.anthropic(secret, edge) as client:
            page = await client.models.with_raw_response.list()
        # The binding window: the team's (3 a minute), not the second key's own 100.
        assert page.headers["x-ratelimit-limit-requests"] == "3"
    async with authz.anthropic(second, 0) as client:
        try:
            await client.models.list()
            raise AssertionError("the team's 4th request in a minute was let through")
        except anthropic.RateLimitError as exc:
            refused = exc
    assert refused.status_code == 429
    message = refused.body["error"]["message"]  # type: ignore[index]
    assert message.startswith(
        f"rate limit: this key's team `t-{team}` allows 3 requests per minute"
    )
    headers = refused.response.headers
    assert int(headers["retry-after"]) >= 1
    assert headers["x-ratelimit-limit-requests"] == "3"
    assert headers["x-ratelimit-remaining-requests"] == "0"
    # Another team's key is not affected.
    _, other = await authz.key(team=await authz.team(rpm=3))
    async with authz.anthropic(other, 1) as client:
        await client.models.list()


async def test_a_teams_tpm_is_shared_by_its_keys(authz: Authz) -> None:
    # About 1,250 tokens a request (5,000 bytes): two fit in 3,000, the third does not.
    team = await authz.team(tpm=3000)
    keys = [await authz.key(team=team), await authz.key(team=team)]
    text = "x" * 4900
    await same_minute(20)
    for (_, secret), edge in zip(keys, (0, 1), strict=True):
        async with authz.anthropic(secret, edge) as client:
            await client.messages.create(
                model="claude-instant",
                max_tokens=8,
                messages=[{"role": "user", "content": text}],
            )
    async with authz.anthropic(keys[0][1], 1) as client:
        try:
            await client.messages.create(
                model="claude-instant",
                max_tokens=8,
                messages=[{"role": "user", "content": text}],
            )
            raise AssertionError("the team's tokens per minute were exceeded")
        except anthropic.RateLimitError as exc:
            message = exc.body["error"]["message"]  # type: ignore[index]
    assert message.startswith(f"rate limit: this key's team `t-{team}` allows 3000 input tokens")


async def test_a_teams_budget_is_shared_by_its_keys(authz: Authz) -> None:
    """One key of the team spends; a budget of one micro-dollar is then used up for every key
    of the team (count_tokens is never refused). The budget is set after the spend: with budget
    holds, a request whose worst case does not fit is never admitted (docs/billing.md)."""
    team = await authz.team()
    (_, spender), (_, other) = await authz.key(team=team), await authz.key(team=team)
    async with authz.anthropic(spender, 0) as client:
        await client.messages.create(model="claude-instant", max_tokens=8, messages=HI)  # type: ignore[arg-type]
    await authz.sql("UPDATE teams SET monthly_budget_micros = 1 WHERE id = $1", team)

    async def refused() -> bool:
        async with authz.anthropic(other, 1) as client:
            try:
                await client.messages.create(model="claude-instant", max_tokens=8, messages=HI)  # type: ignore[arg-type]
            except anthropic.PermissionDeniedError as exc:
                message = exc.body["error"]["message"]  # type: ignore[index]
                assert message.startswith(f"this key's team `t-{team}` has used its monthly budget")
                return True
        return False

    # The usage row is stored within a second; each edge looks the key (and its team's budget)
    # up again within 5 s and asks billing again after 2 s.
    await eventually(refused, within=15)
    async with authz.anthropic(other, 1) as client:
        await client.messages.count_tokens(model="claude-instant", messages=HI)  # type: ignore[arg-type]


async def test_a_stored_conversation_counts_in_the_teams_tpm(authz: Authz) -> None:
    """The translator counts the conversation a previous_response_id adds in the team's window
    too: a long answer continued by another key of the team with a short body is refused."""
    team = await authz.team(tpm=1000)
    (_, first), (_, second) = await authz.key(team=team), await authz.key(team=team)
    await same_minute(30)
    async with authz.openai(first, 0) as client:
        long = await client.responses.create(
            model="claude-instant", input="Talk. [sim:tokens=3000]", max_output_tokens=4000
        )
        with pytest.raises(openai.RateLimitError) as caught:
            await client.responses.create(
                model="claude-instant",
                input="Go on.",
                previous_response_id=long.id,
                max_output_tokens=16,
            )
    body: Any = caught.value.body
    assert body["message"].startswith("rate limit: this key's team allows 1000 input tokens")
    assert "previous_response_id" in body["message"]
    assert caught.value.response.headers["x-ratelimit-limit-tokens"] == "1000"
    # What was given back leaves the window as the team's requests left it: another key of the
    # team still runs a short request.
    async with authz.openai(second, 1) as client:
        await client.responses.create(model="claude-instant", input="hi", max_output_tokens=8)
