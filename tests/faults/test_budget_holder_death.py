"""Budget holds and pending rows when a holder dies (docs/billing.md, "Budget holds", "Pending
rows"; docs/reliability.md). A key with a budget runs requests of both APIs, streamed and not,
while the router (then the translator) holding more of them is SIGKILLed:

- the holds of the requests that ended without a row leave the budget within ``SETTLE_GRACE``
  of their end, and then a request needing nearly all that is left of the budget is admitted;
  once everything settled no hold is left in Redis;
- while the requests published twice (their first holder died) settle, no sample of
  ``GET /api/usage`` (the usage query budgets read) or of the key's spend counter in Redis
  charges a request twice, and once settled each delivered request is charged once."""

from __future__ import annotations

import asyncio
import secrets
import time
from typing import Any

import aiohttp
import anthropic
import asyncpg
from ezat_cli.infra import Infra
from ezat_common import db
from redis import asyncio as aioredis
from support.holds import holds_of, month, until_no_holds

from .conftest import PREFIX
from .load import Gateway, History, attach_rows, check, ranges, run_load, summary, wait_billed
from .test_holder_death import LOAD_METRIC, kill_busier

N = 40
TOKENS = 40  # 4 s at the simulator's 100 ms a token
FAULT_AT = 1.0
BOUND = FAULT_AT + 3.0 + 4.0 + 6.0  # test_holder_death's: the owner timeout, then once more
# A load request's worst case: max_tokens 1024 x $15/M, and about 30 input tokens x $3/M.
WORST = 1024 * 15 + 30 * 3
# Every request of the load fits, with room for one more request.
BUDGET = N * (WORST + 1_000) + 40_000
SETTLE_GRACE = 30.0  # ezat_edge/holds.py
# Left out of the big request's worst case: its input (a few dozen tokens) and rounding.
MARGIN = 2_000
# Billing settles a pending row within its delivery_confirm_seconds (2 s in this stack) and its
# settling round (5 s) of being stored; with room for the load on this machine.
SETTLED = 2.0 + 5.0 + 3.0


async def _budget_key(
    t: Gateway, name: str, budget: int, team: bool = False
) -> tuple[Gateway, list[str]]:
    """A Gateway calling ``t``'s stack with a new key of ``budget`` micro-dollars a month (in a
    new team with a budget ten times as large, ``team``); its budget scopes, the key's first."""
    conn = await asyncpg.connect(t.database_url)
    try:
        team_id = None
        if team:
            team_id = "team_" + secrets.token_hex(6)
            await conn.execute(
                "INSERT INTO teams (id, name, monthly_budget_micros) VALUES ($1, $1, $2)",
                team_id,
                budget * 10,
            )
        key, secret = await db.create_key(conn, name, monthly_budget_micros=budget, team_id=team_id)
    finally:
        await conn.close()
    scopes = [f"key:{key.id}"] + ([f"team:{team_id}"] if team_id else [])
    return Gateway(t.stack, t.url, secret, t.database_url, t.metrics), scopes


async def _big_request(t: Gateway, max_tokens: int) -> str:
    """A short answer whose ``max_tokens`` asks for most of the budget: "ok" or "refused" (the
    budget's 403)."""
    async with anthropic.AsyncAnthropic(base_url=t.url, api_key=t.key, max_retries=0) as client:
        try:
            await client.messages.create(
                model="claude-sonnet-5-5",
                max_tokens=max_tokens,
                messages=[{"role": "user", "content": "Hi [sim:tokens=4]"}],
                timeout=30,  # else the SDK refuses a large max_tokens without streaming
            )
        except anthropic.PermissionDeniedError as exc:
            assert "monthly budget" in str(exc), exc
            return "refused"
    return "ok"


async def _stored_spend(t: Gateway, scope: str) -> int:
    """The key's rows' cost, pending ones too (what billing reports to budgets)."""
    conn = await asyncpg.connect(t.database_url)
    try:
        cost = await conn.fetchval(
            "SELECT coalesce(sum(cost_micros), 0)::int8 FROM usage_records WHERE key_id = $1",
            scope.removeprefix("key:"),
        )
    finally:
        await conn.close()
    return int(cost)


async def test_holds_of_requests_on_a_sigkilled_router_are_released(
    fault_stack: Gateway, infra: Infra
) -> None:
    t, (scope, team) = await _budget_key(fault_stack, "holds-router-kill", BUDGET, team=True)
    killed: list[float] = []
    histories = await run_load(t, N, TOKENS, kill_busier(t, "router", killed), FAULT_AT, 0.0)
    last_end = max(h.ended for h in histories)
    print("router", summary(histories), "after the kill:", ranges(histories, killed[0]))
    errored = [h for h in histories if h.outcome != "complete"]
    assert errored, "no request was on the killed router: the scenario did not run"
    await wait_billed(t, histories, 20.0)
    redis = aioredis.from_url(infra.redis_url)
    try:
        after = await holds_of(redis, PREFIX, scope)
        spent = max(after.spent, await _stored_spend(t, scope))
        max_tokens = (BUDGET - spent - MARGIN) // 15
        assert max_tokens > 1024, (BUDGET, spent)
        # Only the requests that ended without a row still hold their worst case (a request
        # published again holds under its second uid, which its row replaced), on the key and
        # on the team, and each row was counted on both.
        unrecorded = [h for h in histories if not h.rows]
        assert unrecorded, "every request left a row: the scenario did not run"
        assert after.live == len(unrecorded), (after, len(unrecorded))
        on_team = await holds_of(redis, PREFIX, team)
        assert (on_team.live, on_team.spent) == (after.live, after.spent), (on_team, after)
        # So the request needing nearly all that is left does not fit yet.
        assert await _big_request(t, max_tokens) == "refused"
        # Until their holds are past SETTLE_GRACE, then it is admitted.
        released = admitted = None
        while admitted is None:
            now = time.monotonic()
            assert now - last_end < SETTLE_GRACE + 15.0, await holds_of(redis, PREFIX, scope)
            if released is None and (await holds_of(redis, PREFIX, scope)).live == 0:
                released = now - last_end
            if await _big_request(t, max_tokens) == "ok":
                admitted = time.monotonic() - last_end
                if released is None:  # the holds expired between the look above and this
                    released = admitted  # admission: released by then at the latest
            else:
                await asyncio.sleep(0.5)
        print(
            f"holds: {after.live} live when the last request ended ({len(errored)} without a"
            f" complete answer), none {released:.1f} s later; a request of {max_tokens}"
            f" max_tokens (budget {BUDGET} µ$, spent {spent}) admitted {admitted:.1f} s later"
        )
        assert released is not None and released <= SETTLE_GRACE + 1.0, released
        assert admitted <= SETTLE_GRACE + 2.0, admitted
        # Its row replaced its hold, and the admission dropped the expired ones.
        holds = await until_no_holds(redis, PREFIX, scope, 10.0)
        assert (holds.stored, holds.expiring) == (0, 0), holds
        on_team = await holds_of(redis, PREFIX, team)
        assert (on_team.live, on_team.spent) == (0, holds.spent), (on_team, holds)
    finally:
        await redis.aclose()
    await t.aclose()


class Samples:
    """What ``GET /api/usage`` and the spend counter said, sample after sample, and every way
    they charged a request more than once."""

    def __init__(self) -> None:
        self.count = 0
        self.most: dict[str, int] = {}  # request id -> the most one of its rows ever cost
        self.doubled: list[Any] = []
        self.over: list[Any] = []
        self.pending: set[str] = set()  # request ids one of whose rows was ever pending

    def page(self, page: dict[str, Any], counted: int) -> None:
        self.count += 1
        charged: dict[str, list[str]] = {}
        once: dict[str, int] = {}
        for row in page["data"]:
            rid, cost = row["request_id"], row["cost_micros"]
            once[rid] = max(once.get(rid, 0), cost)
            self.most[rid] = max(self.most.get(rid, 0), cost)
            if row["status"] == "pending":
                self.pending.add(rid)
            if row["status"] != "failed":  # complete, pending, client_closed: a charge
                charged.setdefault(rid, []).append(row["status"])
        self.doubled += [(rid, s) for rid, s in charged.items() if len(s) > 1]
        totals = page["totals"]
        shown = totals["cost_micros"] + totals["pending_cost_micros"]
        if shown > sum(once.values()):
            self.over.append(("usage", shown, sum(once.values())))
        if counted > sum(self.most.values()):
            self.over.append(("counter", counted, sum(self.most.values())))


async def _sample(t: Gateway, redis: aioredis.Redis, scope: str, since: float, s: Samples) -> None:
    # The counter first: rows stored after it are in the page, never the other way round.
    counted = int(await redis.get(f"{PREFIX}:spend:{scope}:{month()}") or 0)
    async with (
        aiohttp.ClientSession() as http,
        http.get(
            f"{t.url}/api/usage",
            params={"limit": "1000", "from": str(since)},
            headers={"x-api-key": t.key},
            timeout=aiohttp.ClientTimeout(total=10),
        ) as resp,
    ):
        assert resp.status == 200, await resp.text()
        s.page(await resp.json(), counted)


async def test_pending_rows_are_never_charged_twice_while_a_translator_dies(
    fault_stack: Gateway, infra: Infra
) -> None:
    t, (scope,) = await _budget_key(fault_stack, "holds-translator-kill", BUDGET * 10)
    for name in ("translator", "translator-2"):
        t.baseline[name] = await t.sample(name, LOAD_METRIC["translator"])
    since = time.time() - 1
    killed: list[float] = []
    samples = Samples()
    done = asyncio.Event()
    redis = aioredis.from_url(infra.redis_url)

    async def sampler() -> None:
        while not done.is_set():
            await _sample(t, redis, scope, since, samples)
            await asyncio.sleep(0.25)

    sampling = asyncio.create_task(sampler())
    try:
        histories = await run_load(t, N, TOKENS, kill_busier(t, "translator", killed), FAULT_AT, 0)
        await asyncio.sleep(SETTLED)  # sampled meanwhile: the first publishes' rows settle
        done.set()
        await sampling
        await _sample(t, redis, scope, since, samples)
        holds = await holds_of(redis, PREFIX, scope)
    finally:
        done.set()
        await redis.aclose()
    await attach_rows(t, histories)
    published_twice = [h for h in histories if len(h.rows) > 1]
    print(
        "translator", summary(histories), "after the kill:", ranges(histories, killed[0]),
        f"{len(published_twice)} requests with two rows"
        f" ({len(samples.pending & {h.request_id for h in published_twice})} seen pending);"
        f" {samples.count} samples;"
        f" counter {holds.spent} µ$, rows {sum(samples.most.values())} µ$",
    )  # fmt: skip
    assert not samples.doubled, samples.doubled[:10]
    assert not samples.over, samples.over[:10]
    check(histories, BOUND)  # settled: each delivered request charged once, as complete
    pending = [(h.request_id, h.rows) for h in histories if _pending(h)]
    assert not pending, pending
    await t.aclose()


def _pending(h: History) -> bool:
    return any(r["awaiting_delivery"] for r in h.rows)
