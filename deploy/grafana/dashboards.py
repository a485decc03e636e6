"""The Grafana dashboards (docs/observability.md, "Dashboards"): each panel's question, its
PromQL and its unit, as data; built into Grafana JSON with grafana-foundation-sdk.

``python deploy/grafana/dashboards.py`` writes ``deploy/grafana/<uid>.json`` (for a Grafana
that loads files) and ``deploy/k8s/dashboards.yaml`` (the same JSON as ConfigMaps labelled
``grafana_dashboard: "1"``, what the Grafana Helm chart's dashboard sidecar loads); ``--check``
says whether the committed files are what this module builds. Every query is run against a real
Prometheus scraping a real stack in ``tests/observability/test_prometheus.py``.

Panels filter on ``region`` (the target label the PodMonitor/ServiceMonitor give every series,
from the pod's ``ezat.io/region`` label) and ``model`` through dashboard variables.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from ezat_common.spend_store import spend_sql
from grafana_foundation_sdk.builders import dashboard, prometheus, stat, table, timeseries
from grafana_foundation_sdk.cog.builder import Builder
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.cog.runtime import UnknownDataquery
from grafana_foundation_sdk.cog.variants import Dataquery
from grafana_foundation_sdk.models.dashboard import DataSourceRef, VariableRefresh, VariableSort

HERE = Path(__file__).resolve().parent
K8S = HERE.parent / "k8s" / "dashboards.yaml"
DATASOURCE = DataSourceRef(type_val="prometheus", uid="${datasource}")
R = "[$__rate_interval]"  # Grafana's rate window: at least four scrape intervals
REGION = 'region=~"$region"'


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str


@dataclass(frozen=True)
class Panel:
    title: str
    question: str  # the panel's description in Grafana: what it answers
    unit: str
    queries: tuple[Query, ...]
    stat: bool = False
    # A table of rows of the spend report (SQL on the PostgreSQL data source) instead of PromQL:
    # a team or a key is never a metric label (docs/observability.md, "Money").
    sql: str = ""


@dataclass(frozen=True)
class Dashboard:
    uid: str
    title: str
    description: str
    rows: tuple[tuple[str, tuple[Panel, ...]], ...]


def q(expr: str, legend: str) -> Query:
    return Query(" ".join(expr.split()), legend)


# Grafana's PostgreSQL data source, chosen like the Prometheus one: a read-only role on the
# gateway's database (docs/observability.md, "The spend panels' data source").
PG_TYPE = "grafana-postgresql-datasource"
PG_DATASOURCE = DataSourceRef(type_val=PG_TYPE, uid="${postgres}")


def report_sql(group: str, order_by_cost: bool = False, limit: int | None = None) -> str:
    """The spend report's statement (``GET /admin/v1/spend?group_by=<group>``,
    ezat_common.spend_store) over the dashboard's time range, in dollars too."""
    report = spend_sql([group]).replace("$1", "$__timeFrom()").replace("$2", "$__timeTo()")
    order = f"cost_micros DESC, {group}" if order_by_cost else group
    return (
        f"SELECT {group}, requests, cost_micros, cost_micros::numeric / 1000000 AS cost_usd "
        f"FROM ({report}) AS report ORDER BY {order}" + (f" LIMIT {limit}" if limit else "")
    )


def quantiles(metric: str, by: str, where: str = REGION) -> tuple[Query, ...]:
    """p50 and p99 of a histogram, by the labels ``by``."""
    legend = " ".join("{{" + label.strip() + "}}" for label in by.split(","))
    return tuple(
        q(
            f"histogram_quantile({p}, sum by (le, {by}) (rate({metric}_bucket{{{where}}}{R})))",
            f"p{round(p * 100)} {legend}",
        )
        for p in (0.5, 0.99)
    )


def ratio(part: str, total: str, by: str, legend: str) -> Query:
    """``part``'s share of ``total``; 0 (not "no data") while ``part`` has no series yet, as a
    healthy stack's 5xx counter does."""
    whole = f"sum by ({by}) (rate({total}{R}))"
    return q(f"(sum by ({by}) (rate({part}{R})) or {whole} * 0) / {whole}", legend)


OVERVIEW = Dashboard(
    "ezat-overview",
    "EZAT Router: Overview",
    "Traffic, errors, latency and time to first token by region and model; open streams; the "
    "soonest key expiries.",
    (
        (
            "Traffic",
            (
                Panel(
                    "Requests per second by API and status class",
                    "How much traffic does the gateway answer, and how much of it fails?",
                    "reqps",
                    (
                        q(
                            "sum by (region, api, status) "
                            f"(rate(ezat_edge_requests_total{{{REGION}}}{R}))",
                            "{{region}} {{api}} {{status}}",
                        ),
                    ),
                ),
                Panel(
                    "Error ratio (5xx)",
                    "What share of requests does the gateway fail (the availability SLO's bad "
                    "events; 4xx are the clients' and not counted)?",
                    "percentunit",
                    (
                        ratio(
                            f'ezat_edge_requests_total{{status="5xx", {REGION}}}',
                            f"ezat_edge_requests_total{{{REGION}}}",
                            "region",
                            "{{region}}",
                        ),
                    ),
                ),
                Panel(
                    "Client errors (4xx) by API",
                    "How often are clients refused (bad requests, keys, limits)?",
                    "reqps",
                    (
                        q(
                            "sum by (region, api) "
                            f'(rate(ezat_edge_requests_total{{status="4xx", {REGION}}}{R}))',
                            "{{region}} {{api}}",
                        ),
                    ),
                ),
            ),
        ),
        (
            "Latency",
            (
                Panel(
                    "Time to first token p50/p99 by model",
                    "How long do users wait for the first token, per model and region?",
                    "s",
                    quantiles(
                        "ezat_edge_first_token_seconds",
                        "region, model",
                        f'{REGION}, model=~"$model"',
                    ),
                ),
                Panel(
                    "Request duration p50/p99 by model",
                    "How long do whole requests take, per model and region?",
                    "s",
                    quantiles(
                        "ezat_edge_request_seconds", "region, model", f'{REGION}, model=~"$model"'
                    ),
                ),
            ),
        ),
        (
            "Load",
            (
                Panel(
                    "Open streams and requests in flight",
                    "How many requests and streams are open now?",
                    "short",
                    (
                        q(
                            f"sum by (region) (ezat_edge_active_streams{{{REGION}}})",
                            "streams {{region}}",
                        ),
                        q(
                            f"sum by (region) (ezat_edge_in_flight{{{REGION}}})",
                            "in flight {{region}}",
                        ),
                    ),
                ),
                Panel(
                    "Ready processes by service",
                    "How many processes of each service answer ready (0 is an outage)?",
                    "short",
                    (q(f"sum by (job) (ezat_ready{{{REGION}}})", "{{job}}"),),
                ),
                Panel(
                    "Tokens per second",
                    "How many tokens flow through the gateway, by kind?",
                    "short",
                    (
                        q(
                            f"sum by (kind) (rate(ezat_billing_tokens_total{{{REGION}}}{R}))",
                            "{{kind}}",
                        ),
                    ),
                ),
            ),
        ),
        (
            "Keys",
            (
                Panel(
                    "Soonest key expiries by team",
                    "Which teams have a key about to expire, and when (negative: expired)? "
                    "The 10 soonest; alerts at 7 days and 1 day (docs/tenancy.md).",
                    "s",
                    (
                        q(
                            "bottomk(10, min by (region, team) "
                            f"(ezat_edge_key_expiry_seconds{{{REGION}}}))",
                            "{{region}} {{team}}",
                        ),
                    ),
                    stat=True,
                ),
            ),
        ),
    ),
)

DEPLOYMENTS = Dashboard(
    "ezat-deployments",
    "EZAT Router: Deployments",
    "Per deployment: attempts, upstream time to first byte, health, failovers, affinity and the "
    "cache-read share.",
    (
        (
            "Attempts",
            (
                Panel(
                    "Upstream attempts by deployment and outcome",
                    "Which deployments take the traffic, and which of them fail?",
                    "reqps",
                    (
                        q(
                            "sum by (deployment, outcome) "
                            f"(rate(ezat_router_attempts_total{{{REGION}}}{R}))",
                            "{{deployment}} {{outcome}}",
                        ),
                    ),
                ),
                Panel(
                    "Upstream time to first byte p50/p99",
                    "Which deployment is slowing down?",
                    "s",
                    quantiles("ezat_router_upstream_first_byte_seconds", "deployment"),
                ),
                Panel(
                    "Failovers by deployment left and reason",
                    "Which deployments are abandoned mid-request, and why?",
                    "reqps",
                    (
                        q(
                            "sum by (deployment, reason) "
                            f"(rate(ezat_router_failovers_total{{{REGION}}}{R}))",
                            "{{deployment}} {{reason}}",
                        ),
                    ),
                ),
            ),
        ),
        (
            "Health",
            (
                Panel(
                    "Deployments taking traffic",
                    "Which deployments are up (1) or resting: cooling down or breaker open (0)?",
                    "short",
                    (
                        q(
                            f"min by (deployment, model) (ezat_router_deployment_up{{{REGION}}})",
                            "{{deployment}} {{model}}",
                        ),
                    ),
                ),
                Panel(
                    "Breakers open and cooldowns",
                    "Which breakers are open, and how long until each cooldown ends?",
                    "short",
                    (
                        q(
                            f"max by (deployment) (ezat_router_breaker_open{{{REGION}}})",
                            "breaker {{deployment}}",
                        ),
                        q(
                            "max by (deployment) "
                            f"(ezat_router_cooldown_remaining_seconds{{{REGION}}})",
                            "cooldown s {{deployment}}",
                        ),
                    ),
                ),
                Panel(
                    "Health events",
                    "How often do deployments cool down, open or close their breaker?",
                    "short",
                    (
                        q(
                            "sum by (deployment, event) "
                            f"(increase(ezat_router_health_events_total{{{REGION}}}{R}))",
                            "{{deployment}} {{event}}",
                        ),
                    ),
                ),
            ),
        ),
        (
            "Prompt cache",
            (
                Panel(
                    "Affinity outcomes",
                    "Do conversations stay where their prompt cache lives (hit) or move?",
                    "reqps",
                    (
                        q(
                            f"sum by (outcome) (rate(ezat_router_affinity_total{{{REGION}}}{R}))",
                            "{{outcome}}",
                        ),
                    ),
                ),
                Panel(
                    "Cache-read share of prompt tokens by deployment",
                    "What share of each deployment's prompt tokens came from its cache? A falling "
                    "share is the first sign that affinity broke.",
                    "percentunit",
                    (
                        ratio(
                            f'ezat_router_prompt_tokens_total{{kind="cache_read", {REGION}}}',
                            f"ezat_router_prompt_tokens_total{{{REGION}}}",
                            "deployment",
                            "{{deployment}}",
                        ),
                    ),
                ),
                Panel(
                    "Requests outstanding per deployment",
                    "How many requests does each deployment hold now (least-outstanding "
                    "balancing)?",
                    "short",
                    (
                        q(
                            f"sum by (deployment) (ezat_router_outstanding_requests{{{REGION}}})",
                            "{{deployment}}",
                        ),
                    ),
                ),
            ),
        ),
    ),
)

# Dollars saved by cache reads: each cache-read token would have cost the input price, and cost
# the cache-read price (ezat_billing_price_micros_per_million_tokens, from the config).
_SAVED_PER_MTOK = (
    '(max by (model) (ezat_billing_price_micros_per_million_tokens{kind="input"})'
    ' - max by (model) (ezat_billing_price_micros_per_million_tokens{kind="cache_read"}))'
)

MONEY = Dashboard(
    "ezat-money",
    "EZAT Router: Money",
    "Tokens and cost by model and region, cache savings, estimated against complete records, "
    "billing's acknowledgement latency and the outbox. Counted from the stored rows: these "
    "agree with the invoices.",
    (
        (
            "Tokens and cost",
            (
                Panel(
                    "Tokens per second by model and kind",
                    "How many tokens of each kind does each model consume?",
                    "short",
                    (
                        q(
                            "sum by (model, kind) "
                            f'(rate(ezat_billing_tokens_total{{{REGION}, model=~"$model"}}{R}))',
                            "{{model}} {{kind}}",
                        ),
                    ),
                ),
                Panel(
                    "Cost per hour by model and region",
                    "How many dollars per hour does each model cost, in each region?",
                    "currencyUSD",
                    (
                        q(
                            "sum by (model, region) "
                            "(rate(ezat_billing_cost_micros_total"
                            f'{{{REGION}, model=~"$model"}}{R}))'
                            " * 3600 / 1e6",
                            "{{model}} {{region}}",
                        ),
                    ),
                ),
                Panel(
                    "Cache savings per hour by model",
                    "How many dollars per hour do prompt-cache reads save, against the input "
                    "price?",
                    "currencyUSD",
                    (
                        q(
                            "sum by (model) ("
                            f'rate(ezat_billing_tokens_total{{kind="cache_read", {REGION}}}{R})'
                            f" * on (model) group_left () {_SAVED_PER_MTOK}) * 3600 / 1e12",
                            "{{model}}",
                        ),
                    ),
                ),
            ),
        ),
        (
            "Budgets and spend",
            (
                Panel(
                    "Budgets at each threshold",
                    "How many keys and teams have spent 80 % and 100 % of their monthly budget "
                    "(pending rows included)?",
                    "short",
                    (
                        q(
                            f"max by (scope, threshold) (ezat_billing_budget_scopes{{{REGION}}})",
                            "{{scope}} >= {{threshold}}",
                        ),
                    ),
                ),
                Panel(
                    "Spend per team",
                    "How much did each team spend over the dashboard's time range (the spend "
                    "report by team: charged rows)?",
                    "short",
                    (),
                    sql=report_sql("team"),
                ),
                Panel(
                    "Top keys",
                    "Which 10 keys spent the most over the dashboard's time range (the spend "
                    "report by key)?",
                    "short",
                    (),
                    sql=report_sql("key", order_by_cost=True, limit=10),
                ),
            ),
        ),
        (
            "Records",
            (
                Panel(
                    "Records by status and estimation",
                    "How many usage records settle complete, client-closed or failed, and how "
                    "many have estimated token counts?",
                    "short",
                    (
                        q(
                            "sum by (status, estimated) "
                            f"(rate(ezat_billing_records_total{{{REGION}}}{R}))",
                            "{{status}} estimated={{estimated}}",
                        ),
                    ),
                ),
                Panel(
                    "Usage acknowledgement p50/p99",
                    "How long does every final event wait for its usage record to be durable: "
                    "the outbox's acknowledgement as the edge holds the final event (the usual "
                    "path), and billing's own answer when the outbox cannot take a record?",
                    "s",
                    (
                        *quantiles("ezat_edge_final_hold_seconds", "api"),
                        *quantiles("ezat_billing_ack_seconds", "outcome"),
                    ),
                ),
                Panel(
                    "Outbox depth and oldest message",
                    "How many usage messages wait in the JetStream outbox, and for how long "
                    "(money not yet in PostgreSQL)?",
                    "short",
                    (
                        q(f"max(ezat_billing_outbox_messages{{{REGION}}})", "messages"),
                        q(
                            f"max(ezat_billing_outbox_oldest_message_age_seconds{{{REGION}}})",
                            "oldest (s)",
                        ),
                    ),
                ),
            ),
        ),
    ),
)

FETCHER_AND_LIMITS = Dashboard(
    "ezat-fetcher-limits",
    "EZAT Router: Fetcher and limits",
    "Image downloads, and the requests refused by limits, budgets, authentication and load.",
    (
        (
            "Fetcher",
            (
                Panel(
                    "Downloads by outcome",
                    "How many images are downloaded, and why are the others refused?",
                    "reqps",
                    (
                        q(
                            f"sum by (outcome) (rate(ezat_fetcher_fetches_total{{{REGION}}}{R}))",
                            "{{outcome}}",
                        ),
                    ),
                ),
                Panel(
                    "Download time p50/p99 by outcome",
                    "How long do downloads take?",
                    "s",
                    quantiles("ezat_fetcher_fetch_seconds", "outcome"),
                ),
                Panel(
                    "Downloaded bytes",
                    "How many bytes per second, and how large are the images (p50/p99)?",
                    "bytes",
                    (
                        q(f"sum(rate(ezat_fetcher_bytes_total{{{REGION}}}{R}))", "bytes/s"),
                        *quantiles("ezat_fetcher_fetched_bytes", "region"),
                    ),
                ),
                Panel(
                    "Downloads running and queued",
                    "Is the fetcher saturated?",
                    "short",
                    (
                        q(f"sum(ezat_fetcher_in_flight{{{REGION}}})", "running"),
                        q(f"sum(ezat_fetcher_queued{{{REGION}}})", "queued"),
                    ),
                ),
            ),
        ),
        (
            "Limits",
            (
                Panel(
                    "Refusals by limit",
                    "How often do keys hit their rate limits and budgets, and the gateway its "
                    "own load limits?",
                    "reqps",
                    (
                        q(
                            f"sum by (limit) (rate(ezat_edge_rate_limited_total{{{REGION}}}{R}))",
                            "rate limit {{limit}}",
                        ),
                        q(f"sum(rate(ezat_edge_budget_refused_total{{{REGION}}}{R}))", "budget"),
                        q(f"sum(rate(ezat_edge_overloaded_total{{{REGION}}}{R}))", "overloaded"),
                        q(
                            f"sum(rate(ezat_edge_connections_refused_total{{{REGION}}}{R}))",
                            "connections refused",
                        ),
                    ),
                ),
                Panel(
                    "Authentication failures by reason",
                    "Are clients sending missing or wrong keys, or is authentication down?",
                    "reqps",
                    (
                        q(
                            f"sum by (reason) (rate(ezat_edge_auth_failures_total{{{REGION}}}{R}))",
                            "{{reason}}",
                        ),
                    ),
                ),
                Panel(
                    "Client disconnects by API",
                    "How often do clients go away mid-request?",
                    "reqps",
                    (
                        q(
                            "sum by (api) "
                            f"(rate(ezat_edge_client_disconnects_total{{{REGION}}}{R}))",
                            "{{api}}",
                        ),
                    ),
                ),
                Panel(
                    "Body sizes p50/p99",
                    "How large are requests and responses?",
                    "bytes",
                    (
                        *quantiles("ezat_edge_request_body_bytes", "api"),
                        *quantiles("ezat_edge_response_body_bytes", "api"),
                    ),
                ),
            ),
        ),
        (
            "NATS",
            (
                Panel(
                    "Processes connected to NATS by service",
                    "Is every process on the bus?",
                    "short",
                    (q(f"sum by (job) (ezat_nats_connected{{{REGION}}})", "{{job}}"),),
                ),
                Panel(
                    "NATS reconnects and dropped messages",
                    "How often do connections drop, and are messages lost to slow consumers?",
                    "short",
                    (
                        q(
                            f"sum by (job) (increase(ezat_nats_reconnects_total{{{REGION}}}{R}))",
                            "reconnects {{job}}",
                        ),
                        q(
                            "sum by (job) "
                            f"(increase(ezat_nats_slow_consumer_errors_total{{{REGION}}}{R}))",
                            "dropped {{job}}",
                        ),
                    ),
                ),
            ),
        ),
    ),
)

DASHBOARDS = (OVERVIEW, DEPLOYMENTS, MONEY, FETCHER_AND_LIMITS)
WIDTH = 24  # Grafana's grid


def _variables(sql: bool) -> list[Any]:
    variables = [
        dashboard.DatasourceVariable("datasource").label("Data source").type("prometheus"),
        _label_variable("region", "Region", "ezat_edge_requests_total"),
        _label_variable("model", "Model", "ezat_edge_request_seconds_count"),
    ]
    if sql:
        variables.append(dashboard.DatasourceVariable("postgres").label("Spend").type(PG_TYPE))
    return variables


class _SqlTarget(Builder[Dataquery]):
    """A PostgreSQL data source query (the SDK has no builder for it): a table of ``sql``."""

    def __init__(self, sql: str) -> None:
        self._sql = sql

    def build(self) -> Dataquery:
        ref = {"type": PG_TYPE, "uid": PG_DATASOURCE.uid}
        raw = {"datasource": ref, "format": "table", "rawQuery": True, "editorMode": "code"}
        return UnknownDataquery({**raw, "rawSql": self._sql, "refId": "A"})


def _label_variable(name: str, label: str, metric: str) -> Any:
    return (
        dashboard.QueryVariable(name)
        .label(label)
        .datasource(DATASOURCE)
        .query(f"label_values({metric}, {name})")
        .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(VariableSort.ALPHABETICAL_ASC)
        .multi(True)
        .include_all(True)
        .all_value(".*")
    )


def _panel(spec: Panel, width: int, id: int) -> Any:
    if spec.sql:
        sql = table.Panel().id(id).title(spec.title).description(spec.question)
        sql = sql.datasource(PG_DATASOURCE).span(width).height(8)
        return sql.with_target(_SqlTarget(spec.sql))
    builder = (stat.Panel() if spec.stat else timeseries.Panel()).id(id).title(spec.title)
    builder = builder.description(spec.question).unit(spec.unit).datasource(DATASOURCE)
    builder = builder.span(width).height(8)
    for i, query in enumerate(spec.queries):
        target = (
            prometheus.Dataquery()
            .expr(query.expr)
            .legend_format(query.legend)
            .ref_id(chr(ord("A") + i))
            .datasource(DATASOURCE)
        )
        builder = builder.with_target(target)
    return builder


def build(spec: Dashboard) -> dict[str, Any]:
    """The Grafana JSON model of ``spec``."""
    board = (
        dashboard.Dashboard(spec.title)
        .uid(spec.uid)
        .description(spec.description)
        .tags(["ezat"])
        .refresh("30s")
        .time("now-6h", "now")
        .timezone("browser")
        .readonly()
    )
    sql = any(panel.sql for _, panels in spec.rows for panel in panels)
    for variable in _variables(sql):
        board = board.with_variable(variable)
    ids = iter(range(1, 1000))  # Grafana wants a unique id per panel, rows included
    for title, panels in spec.rows:
        board = board.with_row(dashboard.Row(title).id(next(ids)))
        for panel in panels:
            board = board.with_panel(_panel(panel, WIDTH // len(panels), next(ids)))
    model: dict[str, Any] = json.loads(JSONEncoder(sort_keys=True).encode(board.build()))
    return model


def expressions(model: dict[str, Any]) -> list[tuple[str, str]]:
    """Every (panel title, PromQL) of a built dashboard."""
    return [
        (panel["title"], target["expr"])
        for panel in model.get("panels", [])
        for target in panel.get("targets", [])
        if "expr" in target
    ]


def sql_panels(model: dict[str, Any]) -> dict[str, str]:
    """Every SQL panel of a built dashboard: its title -> its statement."""
    return {
        panel["title"]: target["rawSql"]
        for panel in model.get("panels", [])
        for target in panel.get("targets", [])
        if "rawSql" in target
    }


def rendered() -> dict[Path, str]:
    """The files this module writes, by path."""
    files: dict[Path, str] = {}
    config_maps = []
    for spec in DASHBOARDS:
        text = json.dumps(build(spec), indent=2, sort_keys=True) + "\n"
        files[HERE / f"{spec.uid}.json"] = text
        config_maps.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": f"{spec.uid}-dashboard",
                    "labels": {"grafana_dashboard": "1"},
                    "annotations": {"grafana_folder": "EZAT Router"},
                },
                "data": {f"{spec.uid}.json": text},
            }
        )
    header = (
        "# Generated by deploy/grafana/dashboards.py (make dashboards); do not edit by hand.\n"
        "# The Grafana dashboards as ConfigMaps for Grafana's sidecar (label grafana_dashboard).\n"
    )
    files[K8S] = header + yaml.safe_dump_all(config_maps, sort_keys=True, width=1000)
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args(argv)
    stale = []
    for path, text in rendered().items():
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(path)
        else:
            path.write_text(text)
    for path in stale:
        print(f"{path}: not what deploy/grafana/dashboards.py builds; run make dashboards")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
