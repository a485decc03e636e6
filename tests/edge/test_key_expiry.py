"""The key-expiry gauge (docs/tenancy.md, "Expiry alerts"): a stack of its own on a database of
its own, keys with expiries in several teams and without a team, and the edge's ``/metrics``
read as Prometheus reads it: each team's soonest expiry among its active keys, at most
``key_expiry_teams`` teams named and the rest folded into "other", following changes within the
refresh interval. Then the refresh itself against a database that stops taking connections:
the last expiries are kept and nothing raises."""

from __future__ import annotations

import asyncio
import datetime
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp
import asyncpg
import pytest
from ezat_cli.infra import Infra, free_port
from ezat_common import db
from ezat_edge import metrics as m
from ezat_edge.auth import Authenticator
from ezat_edge.key_expiry import KeyExpiry
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families
from support.config import base_url, listen, one_simulator, write_config
from support.databases import fresh_database
from support.stack import running

pytestmark = pytest.mark.timeout(180)

GAUGE = "ezat_edge_key_expiry_seconds"
INTERVAL = 0.5  # [edge] key_expiry_interval of this stack
TEAMS = 3  # [edge] key_expiry_teams of this stack
HOUR, DAY = 3600.0, 86400.0
# The gauge is computed at the scrape; the test's clock reads it a moment apart.
SLACK = 5.0


@dataclass
class ExpiryStack:
    url: str
    database_url: str

    async def gauge(self) -> dict[str, float]:
        """The gauge's series, by team, as the edge's /metrics shows them now."""
        timeout = aiohttp.ClientTimeout(total=30)
        async with (
            aiohttp.ClientSession(timeout=timeout) as http,
            http.get(self.url + "/metrics") as resp,
        ):
            assert resp.status == 200
            text = await resp.text()
        return {
            s.labels["team"]: s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
            if s.name == GAUGE
        }


@pytest.fixture(scope="module")
def expiry_stack(infra: Infra, data_dir: Path) -> Iterator[ExpiryStack]:
    # A database of its own: the labels are compared with every key of it.
    database_url = asyncio.run(fresh_database(infra.database_url, "ezat_expiry"))
    edge, sim = free_port(), free_port()
    sections = one_simulator(
        edge,
        sim,
        edge={"key_expiry_interval": INTERVAL, "key_expiry_teams": TEAMS},
        simulators=[{"name": "expiry-sim", "listen": listen(sim)}],
    )
    config = write_config(data_dir / f"key-expiry-{edge}" / "ezat.toml", **sections)
    shared = Infra(infra.nats_url, database_url, infra.redis_url)  # stops none of the servers
    with running(config, shared, f"keyexpiry{edge}"):
        yield ExpiryStack(base_url(edge), database_url)


class Keys:
    """Teams and keys written as the admin API writes them (ezat_common.db)."""

    def __init__(self, conn: asyncpg.Connection) -> None:
        self.conn = conn
        self.teams: dict[str, str] = {}

    async def team(self, name: str) -> str:
        team_id = "team_" + secrets.token_hex(8)
        await self.conn.execute("INSERT INTO teams (id, name) VALUES ($1, $2)", team_id, name)
        self.teams[name] = team_id
        return team_id

    async def key(self, team: str | None, expires_in: float | None) -> tuple[str, float | None]:
        """A key of ``team`` (None: none) expiring ``expires_in`` s from now (None: never):
        its id and its expiry (Unix s)."""
        at = None if expires_in is None else time.time() + expires_in
        key, _ = await db.create_key(
            self.conn,
            f"expiry-{secrets.token_hex(3)}",
            team_id=None if team is None else self.teams[team],
            expires_at=None if at is None else datetime.datetime.fromtimestamp(at, datetime.UTC),
        )
        return key.id, at

    async def expire(self, key_id: str, expires_in: float) -> float:
        """The key's expiry moved to ``expires_in`` s from now (an update or an extension)."""
        at = time.time() + expires_in
        when = datetime.datetime.fromtimestamp(at, datetime.UTC)
        await self.conn.execute("UPDATE api_keys SET expires_at = $2 WHERE id = $1", key_id, when)
        return at


async def until_labels(stack: ExpiryStack, labels: set[str], wait: float = 20.0) -> None:
    """Until the gauge has exactly ``labels`` (a few refreshes at most)."""
    deadline = time.monotonic() + wait
    shown: dict[str, float] = {}
    while time.monotonic() < deadline:
        shown = await stack.gauge()
        if set(shown) == labels:
            return
        await asyncio.sleep(INTERVAL / 2)
    raise AssertionError(f"the gauge shows {shown}, not the teams {sorted(labels)}")


async def assert_left(stack: ExpiryStack, expected: dict[str, float]) -> None:
    """The gauge shows exactly ``expected``'s teams, each with the seconds left until its
    expiry (Unix s) as of the scrape."""
    shown = await stack.gauge()
    now = time.time()
    assert set(shown) == set(expected), shown
    for team, at in expected.items():
        assert shown[team] == pytest.approx(at - now, abs=SLACK), (team, shown)


async def test_the_gauge_shows_each_teams_soonest_expiry_under_bounded_labels(
    expiry_stack: ExpiryStack,
) -> None:
    conn = await asyncpg.connect(expiry_stack.database_url)
    try:
        keys = Keys(conn)
        for name in ("alpha", "beta", "gamma", "delta", "omega", "zeta"):
            await keys.team(name)
        # alpha: the soonest active key in 2 h; one sooner is revoked, one never expires.
        alpha_2h, alpha_at = await keys.key("alpha", 2 * HOUR)
        _, alpha_later = await keys.key("alpha", 5 * HOUR)
        revoked, _ = await keys.key("alpha", HOUR)
        assert await db.revoke_key(conn, revoked)
        await keys.key("alpha", None)
        # Keys without a team: "none", 3 h.
        _, none_at = await keys.key(None, 3 * HOUR)
        await keys.key(None, None)
        # beta: a day; its key that expired two days ago is long gone from the gauge.
        _, beta_at = await keys.key("beta", DAY)
        await keys.key("beta", -2 * DAY)
        _, gamma_at = await keys.key("gamma", 10 * DAY)
        await keys.key("delta", 20 * DAY)
        # omega's key expired an hour ago: shown, negative, for a day after.
        omega_key, omega_at = await keys.key("omega", -HOUR)
        # zeta's keys never expire: no series.
        await keys.key("zeta", None)

        # Soonest first: omega, alpha, none | beta, gamma, delta. Three teams named, then
        # "other" with the soonest of the rest (beta's day).
        await until_labels(expiry_stack, {"omega", "alpha", "none", "other"})
        await assert_left(
            expiry_stack, {"omega": omega_at, "alpha": alpha_at, "none": none_at, "other": beta_at}
        )
        assert (await expiry_stack.gauge())["omega"] < 0

        # omega's key is extended by 30 days, alpha's 2-hour key revoked, zeta gets a key for
        # 4 h: none, zeta, alpha | beta, gamma, delta, omega. omega's series goes.
        await keys.expire(omega_key, 30 * DAY)
        assert await db.revoke_key(conn, alpha_2h)
        _, zeta_at = await keys.key("zeta", 4 * HOUR)
        await until_labels(expiry_stack, {"none", "zeta", "alpha", "other"})
        await assert_left(
            expiry_stack, {"none": none_at, "zeta": zeta_at, "alpha": alpha_later, "other": beta_at}
        )

        # beta's key is revoked: "other" is now gamma's 10 days.
        await conn.execute(
            "UPDATE api_keys SET revoked_at = now() WHERE team_id = $1", keys.teams["beta"]
        )
        deadline = time.monotonic() + 20
        while (await expiry_stack.gauge())["other"] < 5 * DAY and time.monotonic() < deadline:
            await asyncio.sleep(INTERVAL / 2)
        await assert_left(
            expiry_stack,
            {"none": none_at, "zeta": zeta_at, "alpha": alpha_later, "other": gamma_at},
        )
    finally:
        await conn.close()


async def test_a_database_that_goes_away_keeps_the_last_expiries(
    infra: Infra, caplog: pytest.LogCaptureFixture
) -> None:
    """The refresh itself (what the edge runs every interval), on a real pool: once the database
    refuses connections, a refresh changes nothing, logs one line and raises nothing; the values
    keep counting down."""
    url = await fresh_database(infra.database_url, "ezat_expiry_outage")
    name = urlsplit(url).path.lstrip("/")
    admin = await asyncpg.connect(infra.database_url)
    conn = await asyncpg.connect(url)
    auth = Authenticator(5.0)
    auth.pool = await asyncpg.create_pool(url, min_size=1, max_size=1)
    team = f"outage-{secrets.token_hex(3)}"
    try:
        keys = Keys(conn)
        await keys.team(team)
        _, at = await keys.key(team, 6 * HOUR)
        await conn.close()
        expiry = KeyExpiry(auth, TEAMS, INTERVAL)
        await expiry.refresh()

        def left() -> float | None:
            return REGISTRY.get_sample_value(GAUGE, {"team": team})

        assert left() == pytest.approx(at - time.time(), abs=SLACK)
        # The database goes away: no new connection, the pool's own one killed.
        await admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
        await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", name
        )
        first = left()
        for _ in range(2):
            await expiry.refresh()  # raises nothing
        assert "key expiries not refreshed" in caplog.text
        assert left() == pytest.approx(at - time.time(), abs=SLACK)
        assert (value := left()) is not None and first is not None and value <= first
    finally:
        m.KEY_EXPIRY.clear()
        await admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
        await auth.pool.close()
        await admin.close()
        if not conn.is_closed():
            await conn.close()
