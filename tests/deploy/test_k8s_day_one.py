"""Kubernetes day one (deploy/k8s/README.md): `ezat k8s secrets` writes exactly the Secrets and
keys the manifests read, and the base needs no Prometheus Operator (its objects are the optional
component components/prometheus-operator, which the overlays include).

Offline: the manifests as YAML, and `kubectl kustomize` (a local render, no cluster) when
kubectl is installed.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from ezat_cli import k8s_secrets

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
OVERLAYS = ROOT / "deploy" / "overlays"
COMPONENT = K8S / "components" / "prometheus-operator"
OPERATOR_API = "monitoring.coreos.com/"
MANIFESTS = sorted([*K8S.rglob("*.yaml"), *OVERLAYS.rglob("*.yaml")])


def docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def walk(node: Any) -> list[dict[str, Any]]:
    """Every mapping inside ``node``, itself included."""
    if isinstance(node, dict):
        return [node, *(m for v in node.values() for m in walk(v))]
    if isinstance(node, list):
        return [m for v in node for m in walk(v)]
    return []


def secret_references() -> tuple[set[tuple[str, str]], set[str]]:
    """(Secret, key) of every reference in the manifests, and the Secrets only ever referenced
    as optional. A whole-Secret volume's keys are the files read under its mount path; an
    envFrom secretRef has no known keys and counts as (name, "*")."""
    text = "\n".join(p.read_text() for p in MANIFESTS)
    refs: dict[tuple[str, str], bool] = {}  # -> optional
    for path in MANIFESTS:
        for d in docs(path):
            for m in walk(d):
                if "secretKeyRef" in m:
                    r = m["secretKeyRef"]
                    refs[(r["name"], r["key"])] = r.get("optional", False)
                if "secretRef" in m:
                    refs[(m["secretRef"]["name"], "*")] = m["secretRef"].get("optional", False)
                if "volumes" in m and "containers" in m:
                    refs.update(_volume_references(m, text))
    optional = {n for n, _ in refs} - {n for (n, _), opt in refs.items() if not opt}
    return set(refs), optional


def _volume_references(pod: dict[str, Any], text: str) -> dict[tuple[str, str], bool]:
    out = {}
    for volume in pod["volumes"]:
        secret = volume.get("secret")
        if secret is None:
            continue
        name, opt = secret["secretName"], secret.get("optional", False)
        if "items" in secret:
            out.update({(name, item["key"]): opt for item in secret["items"]})
            continue
        mounts = [
            m["mountPath"].rstrip("/")
            for c in pod.get("initContainers", []) + pod["containers"]
            for m in c.get("volumeMounts", [])
            if m["name"] == volume["name"]
        ]
        keys = {k for mp in mounts for k in re.findall(re.escape(mp) + r"/([\w.-]+)", text)}
        assert keys, f"secret volume {volume['name']} ({name}): no file under it is read"
        out.update({(name, k): opt for k in keys})
    return out


# ---- ezat k8s secrets covers the manifests --------------------------------------------------


def test_the_secrets_command_writes_exactly_what_the_manifests_read() -> None:
    refs, optional = secret_references()
    assert len(refs) >= 20  # every service's, not an empty walk
    assert k8s_secrets.covered() == refs, (
        f"manifests only: {sorted(refs - k8s_secrets.covered())}; "
        f"command only: {sorted(k8s_secrets.covered() - refs)} (cli/src/ezat_cli/k8s_secrets.py)"
    )
    assert k8s_secrets.optional() == optional


def test_the_readme_names_every_secret_the_command_writes() -> None:
    readme = (K8S / "README.md").read_text()
    table = readme.split("## Secrets to create")[1].split("\n## ")[0]
    for spec in k8s_secrets.CATALOG:
        named = spec.name if "-nats" not in spec.name[5:] else "ezat-<service>-nats"
        assert f"`{named}`" in table, spec.name
    assert "ezat k8s secrets" in readme


def test_the_router_gets_every_provider_key_of_the_config() -> None:
    from ezat_common.config import parse_config

    cm = next(d for d in docs(K8S / "configmap.yaml") if d["kind"] == "ConfigMap")
    cfg = parse_config(cm["data"]["ezat.toml"], "configmap.yaml")
    assert {d.api_key_env for d in cfg.deployments} == set(k8s_secrets.PROVIDER_KEYS)


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
