"""Kubernetes day one (deploy/k8s/README.md): the base needs no Prometheus Operator (its objects
are the optional component components/prometheus-operator, which the overlays include).

Offline: the manifests as YAML, and `kubectl kustomize` (a local render, no cluster) when
kubectl is installed.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
OVERLAYS = ROOT / "deploy" / "overlays"
COMPONENT = K8S / "components" / "prometheus-operator"
OPERATOR_API = "monitoring.coreos.com/"
MANIFESTS = sorted([*K8S.rglob("*.yaml"), *OVERLAYS.rglob("*.yaml")])


def docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


# ---- the Prometheus Operator is optional ----------------------------------------------------


def resources(kustomization_dir: Path) -> list[dict[str, Any]]:
    """Every object a kustomization's resources and components bring, followed through bases."""
    k = docs(kustomization_dir / "kustomization.yaml")[0]
    out = []
    for entry in [*k.get("resources", []), *k.get("components", [])]:
        target = (kustomization_dir / entry).resolve()
        out += resources(target) if target.is_dir() else docs(target)
    return out


def test_the_base_has_no_prometheus_operator_object() -> None:
    base = resources(K8S)
    assert {"Deployment", "StatefulSet", "ConfigMap", "NetworkPolicy"} <= {o["kind"] for o in base}
    assert not [o["kind"] for o in base if o["apiVersion"].startswith(OPERATOR_API)]
    assert not docs(K8S / "kustomization.yaml")[0].get("components")


def test_the_component_has_them_all() -> None:
    k = docs(COMPONENT / "kustomization.yaml")[0]
    assert k["kind"] == "Component" and k["apiVersion"] == "kustomize.config.k8s.io/v1alpha1"
    objects = resources(COMPONENT)
    assert {o["kind"] for o in objects} == {"PodMonitor", "ServiceMonitor", "PrometheusRule"}
    assert all(o["apiVersion"].startswith(OPERATOR_API) for o in objects)
    # ... and no operator object lives anywhere else.
    elsewhere = [
        (p.relative_to(ROOT), d["kind"])
        for p in MANIFESTS
        if COMPONENT not in p.parents
        for d in docs(p)
        if str(d.get("apiVersion", "")).startswith(OPERATOR_API)
    ]
    assert not elsewhere


@pytest.mark.parametrize("region", ["us-east-1", "eu-west-1"])
def test_each_overlay_includes_the_component(region: str) -> None:
    overlay = docs(OVERLAYS / region / "kustomization.yaml")[0]
    assert overlay["components"] == ["../../k8s/components/prometheus-operator"]
    kinds = {o["kind"] for o in resources(OVERLAYS / region)}
    assert {"PrometheusRule", "PodMonitor", "Deployment"} <= kinds


def kustomize(path: Path) -> list[dict[str, Any]]:
    out = subprocess.run(
        ["kubectl", "kustomize", str(path)], capture_output=True, text=True, check=True
    ).stdout
    return [d for d in yaml.safe_load_all(out) if d]


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kustomize_renders_the_base_without_and_the_overlays_with_the_operator() -> None:
    base = kustomize(K8S)
    assert not [o for o in base if o["apiVersion"].startswith(OPERATOR_API)]
    for region in ("us-east-1", "eu-west-1"):
        rendered = kustomize(OVERLAYS / region)
        operator = [o for o in rendered if o["apiVersion"].startswith(OPERATOR_API)]
        assert {o["kind"] for o in operator} == {"PodMonitor", "ServiceMonitor", "PrometheusRule"}
        for o in operator:  # the overlay's namespace and region reach the component's objects
            assert o["metadata"]["namespace"] == "ezat", o["metadata"]["name"]
            assert o["metadata"]["labels"]["ezat.io/region"] == region
            assert o["metadata"]["labels"]["app.kubernetes.io/part-of"] == "ezat"
        assert len(rendered) - len(operator) == len(base) + 1  # + the ezat-region ConfigMap
