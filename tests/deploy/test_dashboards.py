"""The Grafana dashboards as the Kubernetes base ships them (deploy/k8s/dashboards.yaml, built by
deploy/grafana/dashboards.py): the base's resources rendered from its kustomization, and each
dashboard ConfigMap checked as Grafana's sidecar and the API server would take it. Their
queries are run against a real Prometheus in tests/observability/.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "deploy" / "k8s"
sys.path.insert(0, str(ROOT / "deploy" / "grafana"))
import dashboards  # noqa: E402

CONFIGMAP_LIMIT = 1024 * 1024  # bytes of data the API server accepts in one ConfigMap


def rendered_base() -> list[dict[str, Any]]:
    """Every object of the base's resources (what `kustomize build` starts from)."""
    kustomization = yaml.safe_load((BASE / "kustomization.yaml").read_text())
    objects = []
    for resource in kustomization["resources"]:
        objects += [d for d in yaml.safe_load_all((BASE / resource).read_text()) if d]
    return objects


def dashboard_maps() -> list[dict[str, Any]]:
    return [
        o
        for o in rendered_base()
        if o["kind"] == "ConfigMap" and o["metadata"].get("labels", {}).get("grafana_dashboard")
    ]


def test_the_base_ships_each_dashboard_as_a_sidecar_configmap() -> None:
    maps = dashboard_maps()
    assert sorted(m["metadata"]["name"] for m in maps) == sorted(
        f"{spec.uid}-dashboard" for spec in dashboards.DASHBOARDS
    )
    for m in maps:
        assert m["metadata"]["labels"]["grafana_dashboard"] == "1"
        ((name, text),) = m["data"].items()
        assert name.endswith(".json")
        assert len(text.encode()) < CONFIGMAP_LIMIT
        model = json.loads(text)
        assert model == dashboards.build(
            next(s for s in dashboards.DASHBOARDS if s.uid == model["uid"])
        )


def test_the_base_names_every_object_once() -> None:
    seen = [(o["kind"], o["metadata"]["name"]) for o in rendered_base()]
    assert len(seen) == len(set(seen))


PROMETHEUS = {"type": "prometheus", "uid": "${datasource}"}
POSTGRES = {"type": "grafana-postgresql-datasource", "uid": "${postgres}"}


def test_every_panel_queries_the_chosen_prometheus_or_postgresql() -> None:
    """PromQL on the chosen Prometheus; the spend tables (a team or a key is no metric label)
    SQL on the chosen PostgreSQL, a variable only the dashboards with such tables have."""
    for m in dashboard_maps():
        model = json.loads(next(iter(m["data"].values())))
        sql = dashboards.sql_panels(model)
        names = ["datasource", "region", "model"] + (["postgres"] if sql else [])
        assert [v["name"] for v in model["templating"]["list"]] == names
        ids = [p["id"] for p in model["panels"]]
        assert len(ids) == len(set(ids)), model["uid"]
        for panel in model["panels"]:
            if panel["type"] == "row":
                continue
            assert panel["description"] and panel["targets"], panel["title"]
            for target in panel["targets"]:
                if panel["title"] in sql:
                    assert panel["type"] == "table" and target["datasource"] == POSTGRES
                    assert target["format"] == "table" and target["rawSql"].strip()
                else:
                    assert target["datasource"] == PROMETHEUS
                    assert target["expr"].strip()
    money = dashboards.build(dashboards.MONEY)
    assert set(dashboards.sql_panels(money)) == {"Spend per team", "Top keys"}


def test_the_committed_dashboards_are_the_ones_built() -> None:
    assert dashboards.main(["--check"]) == 0


def test_docs_say_what_every_panel_answers() -> None:
    doc = (ROOT / "docs" / "observability.md").read_text()
    for spec in dashboards.DASHBOARDS:
        for row, panels in spec.rows:
            for panel in panels:
                assert f"| {row}: {panel.title} | {panel.question} |" in doc, panel.title
