"""The dashboards and alert rules against a real Prometheus scraping a real stack
(docs/observability.md): traffic on both APIs, including a failover, a 429, a 401, a cache hit,
an early close and an image download, then every dashboard panel's query must parse and return
data, every metric a dashboard or rule names must be exported by some service, every rule must
evaluate without error, and the token and cost counters must equal the usage rows.
"""

from __future__ import annotations

import asyncio
import math
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import anthropic
import asyncpg
import openai
import pytest
from ezat_common.envelopes import TOKEN_FIELDS
from support import images
from support.stack import create_key

from .conftest import RULES, Observed, get_json

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "deploy" / "grafana"))
import dashboards

pytestmark = pytest.mark.timeout(300)

MODEL = "claude-sonnet-5-5"
LONG_SYSTEM = " ".join(f"rule {i}: answer tersely and cite sources." for i in range(160))
HELLO = [{"role": "user", "content": "hello"}]
# Grafana's variables, as "All" selects them; a rate window long enough to hold the traffic
# however long settling took.
VARIABLES = {"$region": ".*", "$model": ".*", "$__rate_interval": "5m"}
# A metric name; not a part of a recording rule's name (level:metric:operations).
METRIC = re.compile(r"(?<![:\w])((?:ezat|process|python)_[a-z0-9_]+)(?![:\w])")


async def _traffic(o: Observed) -> None:
    async with (
        anthropic.AsyncAnthropic(base_url=o.url, api_key=o.key, max_retries=0) as claude,
        openai.AsyncOpenAI(base_url=o.url + "/openai/v1", api_key=o.key, max_retries=0) as gpt,
    ):
        await claude.messages.create(model=MODEL, max_tokens=32, messages=HELLO)
        async with claude.messages.stream(model=MODEL, max_tokens=32, messages=HELLO) as stream:
            await stream.get_final_message()
        await gpt.chat.completions.create(model=MODEL, max_tokens=32, messages=HELLO)  # type: ignore[arg-type]
        chunks = await gpt.chat.completions.create(
            model=MODEL,
            max_tokens=32,
            messages=HELLO,
            stream=True,  # type: ignore[arg-type]
        )
        async for _ in chunks:
            pass
        # A failover: the model's first deployment has nothing listening.
        await claude.messages.create(model="claude-failover", max_tokens=16, messages=HELLO)
        # A prompt-cache write, then a read, in one session.
        system: Any = [
            {"type": "text", "text": LONG_SYSTEM, "cache_control": {"type": "ephemeral"}}
        ]
        session = {"x-ezat-session": f"observed-{uuid.uuid4().hex}"}
        for _ in range(2):
            await claude.messages.create(
                model=MODEL, max_tokens=16, system=system, messages=HELLO, extra_headers=session
            )
        # A 429 (a key allowed one request a minute) and a 401.
        secret = await create_key(o.database_url, "rpm-1", rpm=1)
        async with anthropic.AsyncAnthropic(
            base_url=o.url, api_key=secret, max_retries=0
        ) as limited:
            await limited.messages.create(model=MODEL, max_tokens=8, messages=HELLO)
            with pytest.raises(anthropic.RateLimitError):
                await limited.messages.create(model=MODEL, max_tokens=8, messages=HELLO)
        async with anthropic.AsyncAnthropic(
            base_url=o.url, api_key="ezat_sk_wrong", max_retries=0
        ) as stranger:
            with pytest.raises(anthropic.AuthenticationError):
                await stranger.messages.create(model=MODEL, max_tokens=8, messages=HELLO)
        # An early close: the client leaves after the first text of a long answer.
        async with claude.messages.stream(model=MODEL, max_tokens=4000, messages=HELLO) as stream:
            async for event in stream:
                if event.type == "text":
                    break
        # An image the fetcher downloads.
        async with images.serving() as server:
            picture: Any = {
                "type": "image",
                "source": {"type": "url", "url": f"{server}/photo.png"},
            }
            content: Any = [picture, {"type": "text", "text": "what is it?"}]
            await claude.messages.create(
                model=MODEL, max_tokens=16, messages=[{"role": "user", "content": content}]
            )


async def _settled_sums(database_url: str) -> dict[str, int]:
    """Token and cost sums of the settled rows (what billing's counters count)."""
    columns = ", ".join(f"coalesce(sum({c}), 0)::bigint AS {c}" for c in TOKEN_FIELDS)
    conn = await asyncpg.connect(database_url)
    try:
        row = await conn.fetchrow(
            f"SELECT {columns}, coalesce(sum(cost_micros), 0)::bigint AS cost_micros,"
            " count(*) FILTER (WHERE awaiting_delivery) AS awaiting FROM usage_records"
        )
    finally:
        await conn.close()
    assert row is not None
    return dict(row)


def _counted(o: Observed) -> dict[str, int]:
    """The same sums from the counters, as Prometheus last scraped them."""
    sums = {}
    for field in TOKEN_FIELDS:
        kind = field.removesuffix("_tokens")
        result = o.query(f'sum(ezat_billing_tokens_total{{kind="{kind}"}})')
        sums[field] = int(float(result[0]["value"][1])) if result else 0
    cost = o.query("sum(ezat_billing_cost_micros_total)")
    sums["cost_micros"] = int(float(cost[0]["value"][1])) if cost else 0
    return sums


@pytest.fixture(scope="module")
def after_traffic(observed: Observed) -> Observed:
    """The module's traffic sent, every row settled and scraped."""
    asyncio.run(_traffic(observed))
    deadline = time.monotonic() + 60
    while True:
        table = asyncio.run(_settled_sums(observed.database_url))
        awaiting = table.pop("awaiting")
        if (awaiting == 0 and _counted(observed) == table) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    time.sleep(3)  # a few more scrapes: every series has two samples for rate()
    return observed


def _panels() -> list[tuple[str, str, list[str]]]:
    out = []
    for spec in dashboards.DASHBOARDS:
        model = dashboards.build(spec)
        for panel in model["panels"]:
            # PromQL only: the spend tables' SQL runs in tests/deploy/test_dashboard_spend.py.
            exprs = [target["expr"] for target in panel.get("targets", []) if "expr" in target]
            if exprs:
                out.append((spec.uid, panel["title"], exprs))
    return out


def _substituted(expr: str) -> str:
    for name, value in VARIABLES.items():
        expr = expr.replace(name, value)
    return expr


def test_every_dashboard_panel_parses_and_returns_data(after_traffic: Observed) -> None:
    empty = []
    for uid, title, exprs in _panels():
        values = []
        for expr in exprs:
            result = after_traffic.query(_substituted(expr))  # fails on a parse error
            if not result:
                empty.append(f"{uid} / {title}: {expr}")
            values += [float(r["value"][1]) for r in result]
        if not any(math.isfinite(v) for v in values):
            empty.append(f"{uid} / {title}: no finite value in {values}")
    assert not empty, "\n".join(empty)


def _rule_texts() -> list[str]:
    import yaml

    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule["expr"] for group in groups for rule in group["rules"]]


# Series that exist only where their subject does: a router's credential series need Bedrock
# (SigV4) or Vertex deployments, which this stack has none of. tests/kinds/test_kinds.py
# (test_the_router_exports_how_long_each_signing_credential_has_left) reads them from a router
# that has some.
ONLY_WITH_SIGNING_DEPLOYMENTS = {
    "ezat_router_credential_seconds_left",
    "ezat_router_credential_refreshes_total",
}


def test_every_metric_a_dashboard_or_rule_names_is_exported(after_traffic: Observed) -> None:
    named = {m for _, _, exprs in _panels() for e in exprs for m in METRIC.findall(e)}
    named |= {m for e in _rule_texts() for m in METRIC.findall(e)}
    exported = after_traffic.names()
    assert len(named) > 40
    assert named >= ONLY_WITH_SIGNING_DEPLOYMENTS  # the exemption is for what the rules use
    missing = sorted(named - exported - ONLY_WITH_SIGNING_DEPLOYMENTS)
    assert missing == [], "\n".join(missing)


def test_every_rule_evaluates_against_the_stack(after_traffic: Observed) -> None:
    deadline = time.monotonic() + 10
    while True:
        groups = get_json(f"{after_traffic.prometheus}/api/v1/rules")["data"]["groups"]
        rules = [r for g in groups for r in g["rules"]]
        if all(r.get("lastEvaluation", "").startswith("2") for r in rules) or (
            time.monotonic() > deadline
        ):
            break
        time.sleep(0.5)
    assert len(rules) == len(_rule_texts())
    broken = [(r["name"], r.get("lastError")) for r in rules if r["health"] != "ok"]
    assert broken == []


def test_token_and_cost_counters_equal_the_usage_rows(after_traffic: Observed) -> None:
    table = asyncio.run(_settled_sums(after_traffic.database_url))
    assert table.pop("awaiting") == 0
    assert table["cache_read_tokens"] > 0 and table["cost_micros"] > 0  # the traffic's
    assert _counted(after_traffic) == table


def test_ezat_top_shows_the_traffic_of_its_window(after_traffic: Observed) -> None:
    ezat = str(Path(sys.executable).parent / "ezat")
    config = str(after_traffic.stack.config_path)
    top = subprocess.Popen(
        [ezat, "top", "--once", "--interval", "3", "--config", config],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )

    async def ask() -> None:
        # Until top has printed: its two readings, however late the CLI starts, see traffic
        # between them.
        async with anthropic.AsyncAnthropic(
            base_url=after_traffic.url, api_key=after_traffic.key
        ) as claude:
            deadline = time.monotonic() + 30
            while top.poll() is None and time.monotonic() < deadline:
                await claude.messages.create(model=MODEL, max_tokens=8, messages=HELLO)

    asyncio.run(ask())
    screen, _ = top.communicate(timeout=30)
    assert top.returncode == 0, screen
    lines = screen.splitlines()
    assert lines[0] == "EZAT Router: 5 of 5 targets answering", screen
    (sonnet,) = [line for line in lines if line.startswith("anthropic/claude-sonnet-5-5 ")]
    assert float(sonnet.split()[1]) > 0, screen  # its requests per second
    deployments = {line.split()[0]: line for line in lines if line.startswith("failover-")}
    assert set(deployments) == {"failover-dead", "failover-live"}, screen
    assert deployments["failover-live"].split()[1] == "up", screen


def test_docs_list_every_series_the_stack_exports(after_traffic: Observed) -> None:
    # The operator contract: docs/observability.md lists every series (a histogram by its name,
    # without the _bucket, _count and _sum Prometheus stores it as; _created are timestamps).
    doc = (Path(__file__).resolve().parents[2] / "docs" / "observability.md").read_text()
    exported = {
        re.sub(r"_(bucket|count|sum)$", "", name)
        for name in after_traffic.names()
        if name.startswith("ezat_") and not name.endswith("_created")
    }
    assert len(exported) > 60
    missing = sorted(name for name in exported if f"`{name}`" not in doc)
    assert missing == [], "\n".join(missing)
