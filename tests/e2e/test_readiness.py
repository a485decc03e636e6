"""Readiness that Kubernetes can use, on a whole stack of its own (docs/reliability.md,
"Readiness"; docs/api.md, "Operator status"): each process's /readyz answers for itself, so a
service with no replica leaves the others ready, and the operator's /api/status shows it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from ezat_cli.infra import Infra, stop_process
from ezat_cli.stack import Stack
from support.config import base_url, listen, one_simulator, write_config
from support.probes import get
from support.stack import free_ports, key, running

pytestmark = pytest.mark.timeout(180)

BACKENDS = ("translator", "router", "billing", "fetcher")
DOC = yaml.safe_load((Path(__file__).parents[2] / "docs" / "openapi.yaml").read_text())


class Ready:
    def __init__(self, stack: Stack, ports: dict[str, int], key: str) -> None:
        self.stack = stack
        self.edge = base_url(ports["edge"])
        self.backends = {s: base_url(ports[s]) for s in BACKENDS}
        self.key = key

    def status(self, token: str | None) -> tuple[int, Any]:
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        return get(self.edge + "/api/status", headers)


@pytest.fixture(scope="module")
def ready_stack(infra: Infra, database_url: str, data_dir: Path) -> Iterator[Ready]:
    ports = free_ports("edge", "sim", *BACKENDS)
    sections = one_simulator(
        ports["edge"],
        ports["sim"],
        router={"metrics_listen": listen(ports["router"])},
        translator={"metrics_listen": listen(ports["translator"])},
        billing={"metrics_listen": listen(ports["billing"])},
        fetcher={"metrics_listen": listen(ports["fetcher"])},
        simulators=[{"name": "ready-sim", "listen": listen(ports["sim"])}],
    )
    config = write_config(data_dir / f"ready-{ports['edge']}" / "ezat.toml", **sections)
    stack_infra = Infra(infra.nats_url, database_url, infra.redis_url)
    with running(config, stack_infra, f"ready{ports['edge']}") as stack:
        yield Ready(stack, ports, key(database_url, "readiness"))


def _schema(name: str, value: Any) -> None:
    schema = {"$ref": f"#/components/schemas/{name}", "components": DOC["components"]}
    jsonschema.Draft202012Validator(schema).validate(value)


def test_every_process_answers_its_own_readyz(ready_stack: Ready) -> None:
    for url in [ready_stack.edge, *ready_stack.backends.values()]:
        status, body = get(url + "/readyz")
        assert (status, body["status"]) == (200, "ready"), url
        _schema("Readiness", body)
        assert get(url + "/healthz") == (200, {"status": "ok"})


def test_api_status_is_for_the_operator_only(ready_stack: Ready) -> None:
    assert ready_stack.status(None)[0] == 401
    status, body = ready_stack.status(ready_stack.key)  # a valid API key is not an operator's
    assert status == 403
    assert body["error"]["type"] == "permission_error"
    assert ready_stack.status("not-the-token")[0] == 403

    status, body = ready_stack.status(ready_stack.stack.operator_token)
    assert status == 200
    _schema("StackStatus", body)
    assert body["status"] == "ok"
    assert body["edge"]["ready"] is True
    assert body["nats"]["connected"] is True
    assert (body["postgresql"], body["redis"]) == ("ok", "ok")
    for service in BACKENDS:
        assert body["services"][service] == {"replicas": 1, "ready": 1, "problems": []}
    assert body["deployments"] == {"sonnet-sim": {"up": 1}}


def test_a_service_without_replicas_leaves_the_others_ready(ready_stack: Ready) -> None:
    fetcher = ready_stack.stack.children["fetcher"]
    fetcher.supervised = False  # stays stopped
    assert fetcher.proc is not None
    stop_process(fetcher.proc)
    try:
        assert get(ready_stack.edge + "/readyz")[0] == 200
        for service in ("translator", "router", "billing"):
            assert get(ready_stack.backends[service] + "/readyz")[0] == 200, service
        status, body = ready_stack.status(ready_stack.stack.operator_token)
        assert (status, body["status"]) == (503, "degraded")
        assert body["services"]["fetcher"] == {"replicas": 0, "ready": 0, "problems": []}
        assert body["services"]["router"]["ready"] == 1
        assert body["edge"]["ready"] is True
    finally:
        fetcher.supervised = True  # the supervisor starts it again
        deadline = time.monotonic() + 60
        while not ready_stack.stack.ready() and time.monotonic() < deadline:
            time.sleep(0.2)
