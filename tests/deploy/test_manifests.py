"""Static checks of deploy/: manifests parse, pods are locked down, and the NATS users in
nats.yaml grant each service exactly the subjects it uses (derived from ezat_common.subjects).

Fast and offline: YAML and a small parser for the NATS config, no cluster, no server.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml
from ezat_common.config import parse_config
from ezat_common.subjects import (
    IMAGES,
    PAYLOAD_READERS,
    QUEUE_BILLING,
    QUEUE_FETCHER,
    QUEUE_ROUTER,
    QUEUE_TRANSLATOR,
    Subjects,
)

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
SERVICES = ("edge", "translator", "router", "billing", "fetcher")
S = Subjects(prefix="ezat")
DURABLE = "billing-outbox"  # ezat_billing.drain.DURABLE (asserted below)


def docs(path: Path) -> list[dict[str, Any]]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # safe either way, C is faster
    return [d for d in yaml.load_all(path.read_text(), Loader=loader) if d]


ALL_FILES = sorted([*K8S.rglob("*.yaml"), *(ROOT / "deploy" / "overlays").rglob("*.yaml")])
ALL_DOCS = [(p, d) for p in ALL_FILES for d in docs(p)]


# ---- manifests --------------------------------------------------------------------------------


def test_every_yaml_file_parses() -> None:
    assert len(ALL_FILES) >= 12
    assert {p for p, _ in ALL_DOCS} == set(ALL_FILES)  # every file has a document
    for path, d in ALL_DOCS:
        assert isinstance(d, dict) and ("kind" in d or "resources" in d), path


def pod_specs() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path, d in ALL_DOCS:
        if d.get("kind") in ("Deployment", "StatefulSet", "Job", "DaemonSet"):
            out.append((f"{path.name}:{d['metadata']['name']}", d["spec"]["template"]["spec"]))
    return out


def test_every_container_is_locked_down() -> None:
    specs = pod_specs()
    assert {n.split(":")[1] for n, _ in specs} >= {f"ezat-{s}" for s in SERVICES} | {"nats"}
    for name, spec in specs:
        pod_sc = spec.get("securityContext", {})
        for c in spec.get("initContainers", []) + spec["containers"]:
            sc = c.get("securityContext", {})
            where = f"{name}/{c['name']}"
            assert sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot")) is True, where
            assert sc.get("runAsUser", pod_sc.get("runAsUser", 1)) != 0, where
            assert sc.get("readOnlyRootFilesystem") is True, where
            assert sc.get("allowPrivilegeEscalation") is False, where
            assert sc.get("privileged", False) is False, where
            assert "ALL" in sc.get("capabilities", {}).get("drop", []), where


def test_each_service_runs_ezat_serve() -> None:
    found = {}
    for _, d in ALL_DOCS:
        if d.get("kind") == "Deployment" and d["metadata"]["name"].startswith("ezat-"):
            svc = d["metadata"]["name"].removeprefix("ezat-")
            main = d["spec"]["template"]["spec"]["containers"][0]
            found[svc] = main["command"]
    assert found == {s: ["ezat", "serve", s] for s in SERVICES}


def test_edge_drains_and_probes() -> None:
    edge = next(d for _, d in ALL_DOCS if d.get("kind") == "Deployment" and "edge" in str(d))
    spec = edge["spec"]["template"]["spec"]
    c = spec["containers"][0]
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert "preStop" in c["lifecycle"]
    assert spec["terminationGracePeriodSeconds"] >= 120
    kinds = {d["kind"] for p, d in ALL_DOCS if p.name == "edge.yaml"}
    assert {"Deployment", "Service", "HorizontalPodAutoscaler", "PodDisruptionBudget"} <= kinds


def _declares(container: dict[str, Any], port: str | int) -> bool:
    return any(port in (p.get("name"), p["containerPort"]) for p in container.get("ports", []))


def test_every_workload_has_a_readiness_probe_on_a_port_it_declares() -> None:
    workloads = [
        (p.name, d)
        for p, d in ALL_DOCS
        if d.get("kind") in ("Deployment", "StatefulSet") and p.parent == K8S
    ]
    names = {d["metadata"]["name"] for _, d in workloads}
    assert names >= {f"ezat-{s}" for s in SERVICES} | {"nats"}
    for file, d in workloads:
        main = d["spec"]["template"]["spec"]["containers"][0]
        where = f"{file}:{d['metadata']['name']}"
        probe = main.get("readinessProbe")
        assert probe is not None, f"{where}: no readinessProbe"
        get = probe["httpGet"]
        assert _declares(main, get["port"]), f"{where}: probes undeclared port {get['port']}"
        if d["metadata"]["name"].startswith("ezat-"):
            # Its own readiness; liveness only asks whether its loop answers.
            assert get["path"] == "/readyz", where
            live = main["livenessProbe"]["httpGet"]
            assert live["path"] == "/healthz", where
            assert _declares(main, live["port"]), where
        else:
            assert get["path"].startswith("/healthz"), where  # NATS's monitoring port


# ---- network policies: who may scrape ------------------------------------------------------------

METRICS_PORTS = {9464, 7777}  # every service's metrics_listen; NATS's exporter
MONITORING = {"kubernetes.io/metadata.name": "monitoring"}


def _policies() -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{p.name}:{d['metadata']['name']}", d)
        for p, d in ALL_DOCS
        if p.parent == K8S and d.get("kind") == "NetworkPolicy"
    ]


def _peers(policy: dict[str, Any]) -> list[tuple[dict[str, Any], set[Any]]]:
    """Each ingress peer of ``policy`` and the ports its rule opens (empty set: every port)."""
    return [
        (peer, {p["port"] for p in rule.get("ports", [])})
        for rule in policy["spec"].get("ingress") or []
        for peer in rule.get("from", [{}])
    ]


def _is_scraper(peer: dict[str, Any]) -> bool:
    labels = peer.get("podSelector", {}).get("matchLabels", {})
    return bool(labels.get("app.kubernetes.io/name") == "prometheus")


def test_the_scraper_comes_only_from_the_monitoring_namespace() -> None:
    scrapers = [
        (where, peer) for where, d in _policies() for peer, _ in _peers(d) if _is_scraper(peer)
    ]
    assert [where for where, _ in scrapers] == ["networkpolicies.yaml:ezat-metrics-scrape"]
    for _, peer in scrapers:
        # Never `namespaceSelector: {}` (every namespace) nor a podSelector alone (this one).
        assert peer["namespaceSelector"] == {"matchLabels": MONITORING}, peer


def test_the_scraper_reaches_metrics_ports_only_never_the_edge_api() -> None:
    policy = dict(_policies())["networkpolicies.yaml:ezat-metrics-scrape"]
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    for _, ports in _peers(policy):
        assert ports and ports <= METRICS_PORTS, ports  # empty would be every port
    selected = policy["spec"]["podSelector"]["matchExpressions"][0]["values"]
    assert set(selected) == {f"ezat-{s}" for s in SERVICES} | {"nats"}
    # The edge's API port is reached from the ingress controller only.
    edge = dict(_policies())["networkpolicies.yaml:ezat-edge"]
    for peer, ports in _peers(edge):
        if 8080 in ports or not ports:
            assert peer["namespaceSelector"]["matchLabels"] == {
                "kubernetes.io/metadata.name": "ingress-nginx"
            }
            assert not _is_scraper(peer)


def test_every_metrics_port_the_scraper_reaches_is_declared_and_scraped() -> None:
    cm = next(d for p, d in ALL_DOCS if p.name == "configmap.yaml")
    cfg = parse_config(cm["data"]["ezat.toml"], "configmap.yaml")
    assert cfg.edge.metrics_listen == "0.0.0.0:9464"
    edge = next(d for p, d in ALL_DOCS if p.name == "edge.yaml" and d["kind"] == "Deployment")
    assert _declares(edge["spec"]["template"]["spec"]["containers"][0], "metrics")
    assert edge["spec"]["template"]["metadata"]["annotations"]["prometheus.io/port"] == "9464"
    monitor = next(
        d
        for p, d in ALL_DOCS
        if p.name == "servicemonitor.yaml" and d["metadata"]["name"] == "ezat-edge"
    )
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == ["metrics"]
    service = next(d for p, d in ALL_DOCS if p.name == "edge.yaml" and d["kind"] == "Service")
    assert {"name": "metrics", "port": 9464, "targetPort": "metrics", "protocol": "TCP"} in service[
        "spec"
    ]["ports"]


def test_billing_stops_one_replica_at_a_time() -> None:
    pdb = next(
        d for p, d in ALL_DOCS if p.name == "billing.yaml" and d["kind"] == "PodDisruptionBudget"
    )
    assert pdb["spec"]["maxUnavailable"] == 1
    dep = next(d for p, d in ALL_DOCS if p.name == "billing.yaml" and d["kind"] == "Deployment")
    assert dep["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0


def test_production_config_is_valid_and_keys_are_provided() -> None:
    cm = next(d for p, d in ALL_DOCS if p.name == "configmap.yaml")
    cfg = parse_config(cm["data"]["ezat.toml"], "configmap.yaml")
    assert {d.region for d in cfg.deployments} == {"us-east-1", "eu-west-1"}
    assert all(d.api_key is None and d.api_key_env for d in cfg.deployments)
    for section in (cfg.router, cfg.translator, cfg.billing, cfg.fetcher):
        assert section.metrics_listen == "0.0.0.0:9464"
    router = next(d for p, d in ALL_DOCS if p.name == "router.yaml" and d["kind"] == "Deployment")
    env = {e["name"]: e for e in router["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert {d.api_key_env for d in cfg.deployments} <= set(env)
    assert env["EZAT_ROUTER_REGION"]["valueFrom"]["configMapKeyRef"]["name"] == "ezat-region"
    for region in ("us-east-1", "eu-west-1"):
        overlay = docs(ROOT / "deploy" / "overlays" / region / "kustomization.yaml")[0]
        gen = {g["name"]: g["literals"] for g in overlay["configMapGenerator"]}
        assert gen["ezat-region"] == [f"region={region}"]


# ---- the NATS config parser -------------------------------------------------------------------

_TOKEN = re.compile(
    r'\s*(?:(?P<comment>(?:#|//)[^\n]*)|(?P<str>"(?:[^"\\]|\\.)*")|(?P<punct>[{}\[\],:=])'
    r"|(?P<word>[^\s{}\[\],:=\"#]+))"
)


def _tokens(text: str) -> list[str]:
    out, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        assert m, f"cannot parse NATS config at {text[pos : pos + 40]!r}"
        pos = m.end()
        if m["comment"] is None:
            out.append(m[0].strip())
    return out


def parse_nats_conf(text: str) -> dict[str, Any]:
    """The subset of the NATS config syntax nats.yaml uses: maps, arrays, strings, words."""
    toks = _tokens(text)
    i = 0

    def value() -> Any:
        nonlocal i
        t = toks[i]
        i += 1
        if t == "{":
            return members("}")
        if t == "[":
            items = []
            while toks[i] != "]":
                items.append(value())
                if toks[i] == ",":
                    i += 1
            i += 1
            return items
        if t.startswith('"'):
            return msgspec.json.decode(t)
        return {"true": True, "false": False}.get(t, t)

    def members(end: str | None) -> dict[str, Any]:
        nonlocal i
        out: dict[str, Any] = {}
        while i < len(toks) and toks[i] != end:
            key = toks[i].strip('"')
            i += 1
            if toks[i] in (":", "="):
                i += 1
            out[key] = value()
            if i < len(toks) and toks[i] == ",":
                i += 1
        i += 1
        return out

    return members(None)


def nats_users() -> dict[str, dict[str, Any]]:
    cm = next(d for p, d in ALL_DOCS if p.name == "nats.yaml" and d["kind"] == "ConfigMap")
    assert 'include "auth.conf"' in cm["data"]["nats.conf"]
    auth = parse_nats_conf(cm["data"]["auth.conf"])
    users = auth["accounts"]["EZAT"]["users"]
    assert auth["accounts"]["EZAT"]["jetstream"] == "enabled"
    return {u["user"]: u.get("permissions", {}) for u in users}


# ---- NATS subject matching --------------------------------------------------------------------


def matches(pattern: str, subject: str) -> bool:
    """NATS wildcards: `*` is exactly one token, `>` one or more trailing tokens. A wildcard
    inside a subject (a subscription) matches only if the pattern covers it."""
    p, s = pattern.split("."), subject.split(".")
    for k, tok in enumerate(p):
        if tok == ">":
            return len(s) > k
        if k >= len(s):
            return False
        if tok == "*":
            if s[k] == ">":
                return False
            continue
        if tok != s[k]:
            return False
    return len(p) == len(s)


def test_matcher() -> None:
    assert matches("a.*.c", "a.b.c") and not matches("a.*.c", "a.b.d")
    assert matches("a.>", "a.b.c") and not matches("a.>", "a")
    assert matches("a.*", "a.*") and not matches("a.b", "a.*") and not matches("a.*", "a.>")
    assert not matches("a.b", "a.b.c") and not matches("a.b.c", "a.b")


def _split(entry: str) -> tuple[str, str | None]:
    subject, _, queue = entry.partition(" ")
    return subject, queue or None


def may(perms: dict[str, Any], kind: str, subject: str, queue: str | None = None) -> bool:
    """Whether `perms` lets the user publish/subscribe `subject` (NATS allow/deny semantics:
    deny wins; a queue-restricted allow needs that queue group)."""
    rules = perms.get(kind, {})
    if isinstance(rules, list):
        rules = {"allow": rules}
    allow, deny = rules.get("allow"), rules.get("deny", [])

    def hit(entries: list[str]) -> bool:
        for e in entries:
            subj, q = _split(e)
            if matches(subj, subject) and (q is None or q == queue):
                return True
        return False

    if hit(deny):
        return False
    return True if allow is None and kind in rules else hit(allow or [])


# ---- what each service uses (from the code; see docs/architecture.md) --------------------------

OUTBOX = S.outbox_stream
EDGE_INBOX = S.inbox("edge.0123456789ab") + ".7"
TRANSLATOR_INBOX = S.inbox("translator.0123456789ab") + ".7"
NO_ROUTER = S.inbox("translator.0123456789ab") + ".nr." + EDGE_INBOX
IMAGES_INBOX = S.inbox("translator.0123456789ab-images") + ".3"


def request_inbox(service: str) -> str:
    """A nats-py request()/JetStream reply inbox of ``service``'s connection (bus.connect)."""
    return S.inbox(service) + ".Fj3Yq0o7x9Cw2ZkL5mN8pQ.1"


def claims_read(reader: str) -> list[str]:
    """What reading (and deleting) claims from ``reader``'s bucket publishes (bus.Claims)."""
    bucket = S.payload_bucket(reader)
    obj = f"OBJ_{bucket}"
    return [
        f"$JS.API.STREAM.INFO.{obj}",
        f"$JS.API.STREAM.CREATE.{obj}",
        "$JS.API.STREAM.NAMES",
        f"$JS.API.STREAM.PURGE.{obj}",
        f"$JS.API.STREAM.MSG.GET.{obj}",
        f"$JS.API.CONSUMER.CREATE.{obj}",  # nats-py's ordered consumer (ephemeral, unnamed)
        f"$JS.FC.{obj}.abc.1",
        f"$O.{bucket}.M.bmFtZQ==",
    ]


def claims_put(reader: str) -> list[str]:
    """What putting a claim into ``reader``'s bucket publishes (bus.put_only)."""
    bucket = S.payload_bucket(reader)
    return [f"$O.{bucket}.C.xyz", f"$O.{bucket}.M.bmFtZQ=="]


OUTBOX_SETUP = [f"$JS.API.STREAM.INFO.{OUTBOX}", f"$JS.API.STREAM.CREATE.{OUTBOX}"]

# kind -> list of (subject, queue group or None)
USES: dict[str, dict[str, list[tuple[str, str | None]]]] = {
    "edge": {
        "publish": [
            (S.translate, None),
            (S.cancel, None),
            (S.usage_query, None),
            (S.usage_record, None),  # held final replies the outbox did not acknowledge
            (S.usage_outbox, None),  # delivery confirmations (docs/billing.md)
            *[(S.health(s), None) for s in ("translator", "router", "billing", "fetcher")],
            (S.keys_changed, None),  # the admin API's writes, to every edge
            (S.keys_revoked, None),  # the admin API's revocations
            *[(x, None) for x in claims_read("edge") + claims_put("translator")],
        ],
        "subscribe": [
            (S.inbox("edge.0123456789ab") + ".*", None),
            (S.keys_revoked, None),
            (S.keys_changed, None),  # docs/tenancy.md, "How a request is authorized"
            (request_inbox("edge"), None),
        ],
    },
    "translator": {
        "publish": [
            (S.route, None),
            (S.cancel, None),  # the downloads of a request it gave up
            (S.fetch, None),
            (EDGE_INBOX, None),
            *[(x, None) for x in claims_read("translator") + claims_read(IMAGES)],
            *[(x, None) for x in claims_put("router") + claims_put("edge")],
        ],
        "subscribe": [
            (S.translate, QUEUE_TRANSLATOR),
            (S.cancel, None),
            (S.health("translator"), None),
            (S.inbox("translator.0123456789ab") + ".*", None),
            (S.inbox("translator.0123456789ab") + ".nr.>", None),
            (S.inbox("translator.0123456789ab-images") + ".*", None),
            (request_inbox("translator"), None),
        ],
    },
    "router": {
        "publish": [
            (EDGE_INBOX, None),
            (TRANSLATOR_INBOX, None),
            (S.usage_record, None),
            (S.usage_outbox, None),
            *[(x, None) for x in OUTBOX_SETUP + claims_read("router")],
            *[(x, None) for x in claims_put("edge") + claims_put("translator")],
        ],
        "subscribe": [
            (S.route, QUEUE_ROUTER),
            (S.cancel, None),
            (S.health("router"), None),
            (request_inbox("router"), None),
        ],
    },
    "billing": {
        "publish": [
            (S.usage_outbox, None),
            *[(x, None) for x in OUTBOX_SETUP],
            (f"$JS.API.STREAM.UPDATE.{OUTBOX}", None),  # its replica count (nats_env)
            (f"$JS.API.CONSUMER.INFO.{OUTBOX}.{DURABLE}", None),
            (f"$JS.API.CONSUMER.CREATE.{OUTBOX}.{DURABLE}.{S.usage_outbox}", None),
            (f"$JS.API.CONSUMER.DURABLE.CREATE.{OUTBOX}.{DURABLE}", None),
            (f"$JS.API.CONSUMER.MSG.NEXT.{OUTBOX}.{DURABLE}", None),
            (f"$JS.ACK.{OUTBOX}.{DURABLE}.1.5.5.1700000000000000000.0", None),
        ],
        "subscribe": [
            (S.usage_record, QUEUE_BILLING),
            (S.usage_query, QUEUE_BILLING),
            (S.health("billing"), None),
            (request_inbox("billing"), None),
        ],
    },
    "fetcher": {
        "publish": [(x, None) for x in claims_put(IMAGES)],
        "subscribe": [
            (S.fetch, QUEUE_FETCHER),
            (S.health("fetcher"), None),
            (S.cancel, None),  # drops the downloads of a cancelled request
            (request_inbox("fetcher"), None),
        ],
    },
}
# Services that answer requests they receive (health probes, fetches, usage records/queries).
RESPONDERS = {"translator", "router", "billing", "fetcher"}


def application_subjects() -> dict[str, str]:
    """Every subject spelled in subjects.py, by attribute name: a new one must be placed."""
    out: dict[str, str] = {}
    for name, member in inspect.getmembers(Subjects):
        if isinstance(member, property):
            out[name] = getattr(S, name)
    for svc in SERVICES:
        out[f"health({svc})"] = S.health(svc)
    return out


# Names of JetStream things, checked above.
NOT_SUBJECTS = {"legacy_payload_bucket", "outbox_stream"}


def test_every_subject_in_subjects_py_is_accounted_for() -> None:
    used = {subj for kinds in USES.values() for lst in kinds.values() for subj, _ in lst}
    unplaced = [
        f"{name} = {subj}"
        for name, subj in application_subjects().items()
        if name not in NOT_SUBJECTS and subj not in used and name != "health(edge)"
    ]
    assert not unplaced, f"subjects.py has subjects no service uses here; add them: {unplaced}"
    # The billing outbox consumer's durable name (read, not imported: importing billing is slow).
    drain = (ROOT / "services/billing/src/ezat_billing/drain.py").read_text()
    assert f'DURABLE = "{DURABLE}"' in drain


@pytest.mark.parametrize("service", SERVICES)
def test_nats_user_grants_what_the_service_uses(service: str) -> None:
    perms = nats_users()[service]
    for kind, uses in USES[service].items():
        for subject, queue in uses:
            assert may(perms, kind, subject, queue), f"{service} may not {kind} {subject}"
    assert bool(perms.get("allow_responses")) == (service in RESPONDERS)


@pytest.mark.parametrize("service", SERVICES)
def test_nats_user_grants_nothing_else(service: str) -> None:
    perms = nats_users()[service]
    used = {(k, s) for k, lst in USES[service].items() for s, _ in lst}
    others = [*application_subjects().values(), f"$JS.API.STREAM.DELETE.{OUTBOX}"]
    others += [f"$JS.API.STREAM.UPDATE.{OUTBOX}", f"$JS.API.STREAM.PURGE.{OUTBOX}", "$JS.API.>"]
    for reader in PAYLOAD_READERS:
        obj = f"OBJ_{S.payload_bucket(reader)}"
        others += [f"$JS.API.STREAM.UPDATE.{obj}", f"$JS.API.STREAM.DELETE.{obj}"]
        others += [f"$JS.API.CONSUMER.DELETE.{obj}.abc", f"$JS.API.CONSUMER.INFO.{obj}.abc"]
        others += [f"$JS.API.CONSUMER.DURABLE.CREATE.{obj}.abc"]
        others += [*claims_read(reader), *claims_put(reader)]
    others += [NO_ROUTER, EDGE_INBOX, TRANSLATOR_INBOX, IMAGES_INBOX, "ezat.>", ">"]
    others += ["_INBOX.>", "_INBOX.Fj3Yq0o7x9Cw2ZkL5mN8pQ.1", S.inbox("") + ">"]
    others += [request_inbox(s) for s in SERVICES]
    for kind in ("publish", "subscribe"):
        own = {S.inbox_service(s) for k, s in used if k == kind} - {None}
        for subject in others:
            if (kind, subject) in used or S.inbox_service(subject) in own:
                # Inbox tokens carry the instance: a service granted one inbox of a service
                # has the others of that service (never another service's).
                continue
            assert not may(perms, kind, subject), f"{service} may {kind} {subject}"
        # Queue subjects only within the service's own queue group.
        for subject, queue in USES[service].get("subscribe", []):
            if queue is not None:
                assert not may(perms, "subscribe", subject, None), f"{service}: {subject}"
                assert not may(perms, "subscribe", subject, "other"), f"{service}: {subject}"
    # Wildcards only as whole tokens ("edge-*" would silently match nothing).
    for rules in (perms.get("publish", {}), perms.get("subscribe", {})):
        for entry in rules.get("allow", []) + rules.get("deny", []):
            tokens = _split(entry)[0].split(".")
            assert all(t in ("*", ">") or ("*" not in t and ">" not in t) for t in tokens), entry


def test_only_billing_consumes_usage() -> None:
    users = nats_users()
    for user, perms in users.items():
        for subject in (S.usage_record, S.usage_query):
            for queue in (None, QUEUE_BILLING):
                allowed = may(perms, "subscribe", subject, queue)
                assert allowed == (user == "billing" and queue == QUEUE_BILLING), (user, subject)
        # The outbox is consumed through billing's durable pull consumer, never subscribed.
        assert not may(perms, "subscribe", S.usage_outbox, QUEUE_BILLING), user
        consumer = f"$JS.API.CONSUMER.MSG.NEXT.{OUTBOX}.{DURABLE}"
        assert may(perms, "publish", consumer) == (user == "billing"), user


def test_fetcher_publishes_only_replies_and_claim_checks() -> None:
    perms = nats_users()["fetcher"]
    # Heartbeats are responses too: one a second while a download (up to 120 s) is held.
    responses = perms["allow_responses"]
    assert isinstance(responses, dict) and int(responses["max"]) >= 121, responses
    for entry in perms["publish"]["allow"]:
        assert entry.startswith(f"$O.{S.payload_bucket(IMAGES)}."), entry
    assert not may(perms, "publish", "_INBOX.>")
    assert not may(perms, "publish", "ezat.fetcher.image.fetch")


def test_every_service_has_its_own_nats_secret() -> None:
    for svc in SERVICES:
        dep = next(
            d
            for _, d in ALL_DOCS
            if d.get("kind") == "Deployment" and d["metadata"]["name"] == f"ezat-{svc}"
        )
        env = {e["name"]: e for e in dep["spec"]["template"]["spec"]["containers"][0]["env"]}
        assert env["NATS_URL"]["valueFrom"]["secretKeyRef"]["name"] == f"ezat-{svc}-nats"
    nats = next(d for _, d in ALL_DOCS if d.get("kind") == "StatefulSet")
    env = {e["name"] for e in nats["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert {f"NATS_{u.upper()}_PASSWORD" for u in nats_users()} <= env
    assert nats["spec"]["replicas"] == 3


def test_every_service_gives_its_streams_one_replica_per_nats_node() -> None:
    """The usage outbox and the claim bucket survive a node's death only with a replica on
    every node of the 3-node StatefulSet (docs/reliability.md, "A 3-node NATS cluster")."""
    nats = next(d for _, d in ALL_DOCS if d.get("kind") == "StatefulSet")
    nodes = nats["spec"]["replicas"]
    conf = next(d for p, d in ALL_DOCS if p.name == "nats.yaml" and d["kind"] == "ConfigMap")
    assert "no_advertise: true" in conf["data"]["nats.conf"]  # clients use the pod names
    for svc in SERVICES:
        dep = next(
            d
            for _, d in ALL_DOCS
            if d.get("kind") == "Deployment" and d["metadata"]["name"] == f"ezat-{svc}"
        )
        env = {e["name"]: e for e in dep["spec"]["template"]["spec"]["containers"][0]["env"]}
        assert env["EZAT_JETSTREAM_REPLICAS"]["value"] == str(nodes), svc


def test_backend_drains_fit_in_the_grace_period() -> None:
    """SIGTERM drains for [shutdown] drain_timeout (docs/reliability.md): every backend pod's
    grace period covers its preStop, that deadline and the cleanup after it."""
    cm = next(d for p, d in ALL_DOCS if p.name == "configmap.yaml")
    drain = parse_config(cm["data"]["ezat.toml"], "configmap.yaml").shutdown.drain_timeout
    for svc in ("router", "translator", "billing", "fetcher"):
        dep = next(d for p, d in ALL_DOCS if p.name == f"{svc}.yaml" and d["kind"] == "Deployment")
        spec = dep["spec"]["template"]["spec"]
        command = spec["containers"][0]["lifecycle"]["preStop"]["exec"]["command"]
        assert command[0] == "sleep", svc
        pre_stop = float(command[1])
        # Cleanup after the deadline: the router's cancel grace and usage flush, NATS drain.
        assert spec["terminationGracePeriodSeconds"] >= pre_stop + drain + 10, svc


@pytest.mark.parametrize("service", ["edge", "billing"])
def test_the_budget_store_is_reachable_where_budgets_are_held_and_counted(service: str) -> None:
    """The edge holds budgets and billing counts the rows that replace the holds, both in Redis
    (docs/billing.md, "Budget holds"): each gets REDIS_URL, the optional shared budget Redis
    (EZAT_BUDGET_REDIS_URL, "Across regions"), and egress to Redis's port."""
    dep = next(d for p, d in ALL_DOCS if p.name == f"{service}.yaml" and d["kind"] == "Deployment")
    env = {e["name"]: e for e in dep["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["REDIS_URL"]["valueFrom"]["secretKeyRef"]["name"] == "ezat-redis"
    budget = env["EZAT_BUDGET_REDIS_URL"]["valueFrom"]["secretKeyRef"]
    assert (budget["name"], budget.get("optional")) == ("ezat-budget-redis", True)
    policy = dict(_policies())[f"networkpolicies.yaml:ezat-{service}"]
    egress_ports = {
        p["port"] for rule in policy["spec"].get("egress") or [] for p in rule.get("ports", [])
    }
    assert 6379 in egress_ports
