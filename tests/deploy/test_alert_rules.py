"""The alert rules (deploy/prometheus/rules.yml): promtool accepts them and their unit tests pass,
every alert is driven firing and silent by those tests, carries what an operator needs (severity,
summary, a description with the values, a runbook section in docs/operations.md that lists what
it uses), and the Kubernetes base's PrometheusRule is exactly the generated copy.

promtool is Debian's `prometheus` package (`make test` installs it when it can); without it these
tests fail, saying so, rather than skip.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PROM = ROOT / "deploy" / "prometheus"
RULES = PROM / "rules.yml"
UNIT_TESTS = sorted((PROM / "tests").glob("*.yml"))
K8S = ROOT / "deploy" / "k8s"
OPERATOR = K8S / "components" / "prometheus-operator"  # the optional component
OPERATIONS = ROOT / "docs" / "operations.md"
SEVERITIES = {"page", "ticket"}


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.fail(
            "promtool not found: apt-get install prometheus (make test installs it as root)",
            pytrace=False,
        )
    return path


def run_promtool(*args: str) -> str:
    done = subprocess.run([promtool(), *args], capture_output=True, text=True, timeout=90)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    return out


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def rules_of(groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for g in groups for r in g["rules"]]


GROUPS = load(RULES)["groups"]
ALERTS = [r for r in rules_of(GROUPS) if "alert" in r]
RECORDS = {r["record"]: r["expr"] for r in rules_of(GROUPS) if "record" in r}


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("generate_rule", PROM / "generate_rule.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---- promtool ---------------------------------------------------------------------------------


def test_promtool_accepts_the_rules() -> None:
    out = run_promtool("check", "rules", str(RULES))
    assert f"SUCCESS: {len(rules_of(GROUPS))} rules found" in out


def test_promtool_unit_tests_pass() -> None:
    assert len(UNIT_TESTS) >= 5
    out = run_promtool("test", "rules", *map(str, UNIT_TESTS))
    assert out.count("SUCCESS") == len(UNIT_TESTS), out


def test_every_alert_rule_is_driven_firing_and_silent() -> None:
    """Each alerting rule (each severity/window/service variant) is expected firing, with its
    labels and annotations, by some unit test, and each alert name is expected silent by one."""
    firing: list[tuple[str, dict[str, Any]]] = []
    silent: set[str] = set()
    for path in UNIT_TESTS:
        doc = load(path)
        assert doc["rule_files"] == ["../rules.yml"], path
        for test in doc["tests"]:
            for case in test.get("alert_rule_test", []):
                if not case.get("exp_alerts"):
                    silent.add(case["alertname"])
                for exp in case.get("exp_alerts") or []:
                    assert set(exp["exp_annotations"]) == {"summary", "description", "runbook_url"}
                    firing.append((case["alertname"], exp["exp_labels"]))
    for rule in ALERTS:
        static = rule.get("labels", {})
        assert any(
            name == rule["alert"] and static.items() <= labels.items() for name, labels in firing
        ), f"no unit test expects {rule['alert']} {static} to fire"
    assert {r["alert"] for r in ALERTS} <= silent, "alerts never expected silent"


# ---- what an operator gets --------------------------------------------------------------------


def test_every_alert_has_severity_summary_description_and_runbook() -> None:
    assert len({r["alert"] for r in ALERTS}) >= 12
    for rule in ALERTS:
        name, ann = rule["alert"], rule["annotations"]
        assert rule["labels"]["severity"] in SEVERITIES, name
        assert set(ann) == {"summary", "description", "runbook_url"}, name
        assert ann["runbook_url"] == f"docs/operations.md#{name.lower()}", name
        if not rule["expr"].startswith("absent("):  # absent() has no value or labels to print
            assert "{{ $value" in ann["description"], name
            assert "{{ $labels." in ann["description"], name


def sections() -> dict[str, str]:
    """docs/operations.md's sections by the anchor GitHub gives their heading."""
    text = OPERATIONS.read_text()
    parts = re.split(r"^#{2,3} (.+)$", text, flags=re.M)
    return {
        re.sub(r"[^a-z0-9 _-]", "", head.strip().lower()).replace(" ", "-"): body
        for head, body in zip(parts[1::2], parts[2::2], strict=True)
    }


def used_series(expr: str) -> set[str]:
    """The series an expression reads, through the recording rules it uses."""
    names = set(re.findall(r"\b(ezat_[a-z0-9_]+|job:ezat_[a-z0-9_]+:[a-z0-9_]+)", expr))
    for name in list(names):
        if name in RECORDS:
            names |= used_series(RECORDS[name])
    return names


def test_each_alert_has_a_runbook_section_listing_what_it_uses() -> None:
    docs = sections()
    for rule in ALERTS:
        anchor = rule["alert"].lower()
        assert anchor in docs, f"docs/operations.md has no section {rule['alert']}"
        body = docs[anchor]
        for what in ("What it means", "What to look at", "What to do"):
            assert what in body, f"{rule['alert']}: no '{what}'"
        named = set(re.findall(r"`([a-z_:0-9]+)[`{]", body))
        missing = used_series(rule["expr"]) - named
        assert not missing, f"{rule['alert']}: its section does not name {missing}"


# ---- the PrometheusRule of the Kubernetes base ------------------------------------------------


def test_prometheus_rule_is_the_generated_copy_of_the_rules() -> None:
    gen = generator()
    committed = (OPERATOR / "prometheusrule.yaml").read_text()
    assert committed == gen.prometheus_rule(RULES.read_text()), (
        f"{OPERATOR.relative_to(ROOT)}/prometheusrule.yaml is stale: "
        "run python deploy/prometheus/generate_rule.py"
    )
    assert load(OPERATOR / "prometheusrule.yaml")["spec"]["groups"] == GROUPS


def test_prometheus_rule_is_in_the_operator_component_and_valid(tmp_path: Path) -> None:
    kustomization = load(OPERATOR / "kustomization.yaml")
    assert "prometheusrule.yaml" in kustomization["resources"]
    doc = load(OPERATOR / "prometheusrule.yaml")
    assert doc["apiVersion"] == "monitoring.coreos.com/v1" and doc["kind"] == "PrometheusRule"
    assert doc["metadata"]["name"] == "ezat"
    assert doc["metadata"]["labels"]["app.kubernetes.io/part-of"] == "ezat"
    assert set(doc) == {"apiVersion", "kind", "metadata", "spec"} and set(doc["spec"]) == {"groups"}
    for group in doc["spec"]["groups"]:
        assert set(group) <= {"name", "interval", "rules"} and group["rules"], group["name"]
        for rule in group["rules"]:
            assert ("alert" in rule) != ("record" in rule), rule
            assert isinstance(rule["expr"], str), rule
            for key in ("labels", "annotations"):
                assert all(isinstance(v, str) for v in rule.get(key, {}).values()), rule
    # What the Prometheus Operator hands Prometheus: the spec as a rules file.
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(doc["spec"]))
    run_promtool("check", "rules", str(tmp_path / "rules.yml"))
    # The backend services' PodMonitor names each job after its service, as the rules expect.
    monitors = yaml.safe_load_all((OPERATOR / "servicemonitor.yaml").read_text())
    pod_monitor = next(d for d in monitors if d["kind"] == "PodMonitor")
    assert pod_monitor["spec"]["jobLabel"] == "app.kubernetes.io/name"


def test_runbook_base_can_be_changed(tmp_path: Path) -> None:
    base = "https://git.example.com/ezat/-/blob/main/"
    assert generator().main(["--runbook-base", base, "--out", str(tmp_path)]) == 0
    rules = load(tmp_path / "rules.yml")["groups"]
    rule = load(tmp_path / "prometheusrule.yaml")
    assert rule["spec"]["groups"] == rules
    urls = [r["annotations"]["runbook_url"] for r in rules_of(rules) if "alert" in r]
    assert urls == [base + r["annotations"]["runbook_url"] for r in ALERTS]
    run_promtool("check", "rules", str(tmp_path / "rules.yml"))
