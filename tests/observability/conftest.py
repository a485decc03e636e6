"""A stack with every service's metrics port, scraped once a second by a real Prometheus
(Debian's ``prometheus`` package: ``make test`` installs it) that also loads the alert rules
of deploy/prometheus/. Started once for the module's tests."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.error import HTTPError, URLError
from urllib.parse import urlencode
from urllib.request import urlopen

import pytest
import yaml
from ezat_cli.infra import Infra, free_port
from ezat_cli.stack import Stack
from support.config import SONNET, base_url, deployment, listen, model, write_config
from support.databases import fresh_database
from support.stack import free_ports, key, running

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "rules.yml"
SERVICES = ("edge", "translator", "router", "billing", "fetcher")
PREFIX = "prom"
FAILOVER = "anthropic/claude-failover-sim"


def _config(path: Path, ports: dict[str, int]) -> Path:
    return write_config(
        path,
        # The key-expiry gauge refreshed every second: its panel and alerts have data at once.
        edge={"listen": listen(ports["edge"]), "ping_interval": 1.0, "key_expiry_interval": 1.0},
        router={
            "region": "local",
            "max_attempts": 3,
            "connect_timeout": 1.0,
            "metrics_listen": listen(ports["router"]),
        },
        translator={"metrics_listen": listen(ports["translator"])},
        billing={"metrics_listen": listen(ports["billing"])},
        fetcher={"metrics_listen": listen(ports["fetcher"]), "allow_networks": ["127.0.0.0/8"]},
        models=[
            model(SONNET, aliases=["claude-sonnet-5-5"], prompt_caching=True),
            model(FAILOVER, aliases=["claude-failover"], price={"input": 1.0, "output": 2.0}),
        ],
        simulators=[{"name": "sim", "listen": listen(ports["sim"])}],
        deployments=[
            deployment(
                "sonnet-sim", SONNET, base_url(ports["sim"]), upstream_model="claude-sonnet-5-5"
            ),
            # Nothing listens on "dead", which the router tries first (its region is the
            # router's): every request to the model fails over to "live", in another region.
            deployment("failover-dead", FAILOVER, base_url(ports["dead"])),
            deployment("failover-live", FAILOVER, base_url(ports["sim"]), region="elsewhere"),
        ],
    )


@dataclass
class Observed:
    """The stack, its key, and the Prometheus that scrapes it."""

    stack: Stack
    url: str  # the edge
    sim: str
    key: str
    prometheus: str
    database_url: str
    metrics: dict[str, str]  # service -> its /metrics URL

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's result vector; fails on a query Prometheus refuses."""
        body = get_json(f"{self.prometheus}/api/v1/query?" + urlencode({"query": expr}))
        assert body["status"] == "success", (expr, body)
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def names(self) -> set[str]:
        return set(get_json(f"{self.prometheus}/api/v1/label/__name__/values")["data"])


def prometheus_binary() -> str:
    found = shutil.which("prometheus")
    if found is None:
        pytest.fail("no prometheus binary: apt-get install prometheus (make test does it)")
    return found


def _scrape_config(metrics: dict[str, str], rules: Path) -> dict[str, Any]:
    jobs = []
    for service, url in metrics.items():
        host = url.removeprefix("http://").removesuffix("/metrics")
        jobs.append(
            {
                "job_name": service,
                "scrape_interval": "1s",
                # billing's token and cost series carry the region of their rows: theirs wins.
                "honor_labels": service == "billing",
                "static_configs": [{"targets": [host], "labels": {"region": "local"}}],
            }
        )
    return {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(rules)],
        "scrape_configs": jobs,
    }


@pytest.fixture(scope="module")
def observed(infra: Infra, data_dir: Path) -> Iterator[Observed]:
    binary = prometheus_binary()
    # A database of its own: the counters are compared with every row of it, and the session's
    # database holds the rows of every other stack.
    database_url = asyncio.run(fresh_database(infra.database_url, "ezat_observed"))
    ports = free_ports("edge", "sim", "dead", "router", "translator", "billing", "fetcher")
    folder = data_dir / "observed"
    config = _config(folder / "ezat.toml", ports)
    metrics = {
        service: base_url(ports[service]) + "/metrics" for service in SERVICES if service != "edge"
    }
    metrics["edge"] = base_url(ports["edge"]) + "/metrics"
    stack_infra = Infra(infra.nats_url, database_url, infra.redis_url)
    # A key that expires (in 30 days): the key-expiry gauge has a series.
    key(database_url, "observed-expiring", expires_at=datetime.now(UTC) + timedelta(days=30))
    with running(config, stack_infra, PREFIX) as stack:
        prom_port = free_port()
        prom_config = folder / "prometheus.yml"
        prom_config.write_text(yaml.safe_dump(_scrape_config(metrics, RULES)))
        log = open(folder / "prometheus.log", "wb")  # noqa: SIM115 - closed below
        proc = subprocess.Popen(
            [
                binary,
                f"--config.file={prom_config}",
                f"--storage.tsdb.path={folder / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{prom_port}",
                "--web.enable-lifecycle",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            prom = f"http://127.0.0.1:{prom_port}"
            _wait_ready(prom, proc, folder / "prometheus.log")
            _wait_scraped(prom, len(metrics))
            yield Observed(
                stack,
                base_url(ports["edge"]),
                base_url(ports["sim"]),
                key(database_url, "observed", rpm=1000),
                prom,
                database_url,
                metrics,
            )
        finally:
            proc.terminate()
            proc.wait(10)
            log.close()


def _wait_ready(prom: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()[-2000:]
        try:
            with urlopen(f"{prom}/-/ready", timeout=1) as resp:
                if resp.status == 200:
                    return
        except (URLError, OSError):
            pass
        time.sleep(0.2)
    raise AssertionError("prometheus not ready in 30 s:\n" + log.read_text()[-2000:])


def _wait_scraped(prom: str, targets: int) -> None:
    """Until every target was scraped twice: a counter's first event must land after a sample
    of it, or Prometheus cannot see it grow."""
    query = urlencode({"query": "count(count_over_time(up[1m]) >= 2 and up == 1)"})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        result = get_json(f"{prom}/api/v1/query?{query}")["data"]["result"]
        if result and int(float(result[0]["value"][1])) == targets:
            return
        time.sleep(0.2)
    raise AssertionError(f"prometheus did not scrape the {targets} targets twice in 30 s")


def get_json(url: str) -> dict[str, Any]:
    """A GET's JSON body; Prometheus's 400s (a query it refuses) carry JSON too."""
    try:
        with urlopen(url, timeout=10) as resp:
            body: dict[str, Any] = json.loads(resp.read())
    except HTTPError as exc:
        body = json.loads(exc.read())
    return body
