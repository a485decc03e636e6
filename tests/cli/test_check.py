"""`ezat check` on good and broken configs, and the services refusing to start on the same
problems with one line and no traceback (issue 27, "Fail loudly on misconfiguration")."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from ezat_cli import folder
from ezat_cli.infra import Infra, free_port
from support.config import SONNET, base_url, deployment, listen, model, one_simulator, write_config

EZAT = str(Path(sys.executable).parent / "ezat")


def run(*args: str, env: dict[str, str], timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout)


def clean_env(tmp_path: Path) -> dict[str, str]:
    """No provider credentials from the machine, no stack's URLs, a data folder of the test's."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AWS_", "GOOGLE_", "CLOUDSDK_"))
        and k not in ("NATS_URL", "DATABASE_URL", "REDIS_URL", "EZAT_CONFIG")
    }
    env["EZAT_DATA_DIR"] = str(tmp_path / "data")
    env["AWS_CONFIG_FILE"] = str(tmp_path / "no-aws-config")
    env["AWS_SHARED_CREDENTIALS_FILE"] = str(tmp_path / "no-aws-credentials")
    env["AWS_EC2_METADATA_DISABLED"] = "true"
    env["GOOGLE_APPLICATION_CREDENTIALS"] = str(tmp_path / "no-google-key.json")
    env["CLOUDSDK_CONFIG"] = str(tmp_path / "no-gcloud")
    env["NO_GCE_CHECK"] = "True"  # google-auth: no metadata server probe
    return env


@pytest.fixture
def held_port() -> Iterator[int]:
    """A loopback port another program listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def good_config(path: Path) -> Path:
    sections = one_simulator(free_port(), free_port())
    sections["router"] = {**sections["router"], "metrics_listen": listen(free_port())}  # type: ignore[dict-item]
    return write_config(path, **sections)


def test_a_good_config_checks_ok(tmp_path: Path) -> None:
    config = good_config(tmp_path / "good.toml")
    done = run(EZAT, "check", "--config", str(config), env=clean_env(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert all(line.startswith("ok: ") for line in lines), lines
    assert any("credentials of anthropic" in line for line in lines)
    assert any("ports free" in line for line in lines)
    assert any("not in use" in line for line in lines)


def keyless(name: str, sim: str, **fields: str) -> dict[str, str]:
    dep = {**deployment(name, SONNET, sim), **fields}
    del dep["api_key"]
    return dep


def broken_config(path: Path, port: int) -> Path:
    sim = base_url(free_port())
    return write_config(
        path,
        edge={"listen": listen(port)},
        router={"metrics_listen": listen(port)},
        models=[model(SONNET)],
        deployments=[
            keyless("keyless-sim", sim),
            keyless("prod-us", sim, api_key_env="OPS_NO_KEY"),
            {
                "name": "bedrock-us",
                "model": SONNET,
                "kind": "bedrock",
                "region": "us-east-1",
                "model_id": "anthropic.claude-sonnet",
            },
            {
                "name": "vertex-eu",
                "model": SONNET,
                "kind": "vertex",
                "region": "europe-west1",
                "project": "p",
                "model_id": "claude-sonnet",
            },
        ],
    )


def test_a_broken_environment_names_each_problem(tmp_path: Path, held_port: int) -> None:
    config = broken_config(tmp_path / "broken.toml", held_port)
    env = clean_env(tmp_path)
    env["OPS_NO_KEY"] = ""  # set but empty counts as unset
    held = folder.lock(tmp_path / "data")  # as a running `ezat up` holds it
    try:
        done = run(EZAT, "check", "--config", str(config), env=env)
    finally:
        os.close(held)
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    problems = [line for line in out.splitlines() if line.startswith("problem: ")]
    assert len(problems) == 6, out
    assert "deployment `prod-us`: api_key_env: the variable OPS_NO_KEY is unset or empty" in out
    assert any("`bedrock-us`" in p and "AWS_ACCESS_KEY_ID" in p for p in problems), out
    assert any("`vertex-eu`" in p and "google" in p.lower() for p in problems), out
    assert f"edge.listen: 127.0.0.1:{held_port} is already in use" in out
    assert f"router.metrics_listen: 127.0.0.1:{held_port} is also edge.listen" in out
    assert f"another ezat up (pid {os.getpid()}) is running with data folder" in out
    assert "keyless-sim" not in out  # no key on purpose: the simulators take none
    # Once the environment is right, the same config checks ok but for the port.
    env["OPS_NO_KEY"] = "sk-test"
    again = run(EZAT, "check", "--config", str(config), env=env)
    assert "OPS_NO_KEY" not in again.stdout and "another ezat up" not in again.stdout


def test_an_invalid_config_is_one_problem(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text('[edge]\nlisten = "nowhere"\n')
    done = run(EZAT, "check", "--config", str(config), env=clean_env(tmp_path))
    assert done.returncode == 1
    assert done.stdout.strip() == (
        f"problem: config: {config}: edge.listen: `nowhere` is not HOST:PORT"
    ), done.stdout


# ---- the services refuse the same problems ------------------------------------------------


def service(module: str, config: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {**env, "EZAT_CONFIG": str(config), "EZAT_SUBJECT_PREFIX": "refusals"}
    return run(sys.executable, "-m", module, env=env, timeout=60)


def one_line_refusal(done: subprocess.CompletedProcess[str], *expected: str) -> None:
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("ezat: ")]
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    for text in expected:
        assert text in lines[0], lines[0]


def test_the_router_refuses_an_unset_key_variable(tmp_path: Path) -> None:
    sections = one_simulator(free_port(), free_port())
    dep = {**sections["deployments"][0], "api_key_env": "OPS_ROUTER_KEY"}  # type: ignore[index]
    del dep["api_key"]
    sections["deployments"] = [dep]
    config = write_config(tmp_path / "router.toml", **sections)
    env = clean_env(tmp_path)
    done = service("ezat_router", config, env)
    one_line_refusal(done, "deployment `sonnet-sim`", "OPS_ROUTER_KEY")


@pytest.mark.parametrize("module", ["ezat_edge", "ezat_fetcher"])
def test_a_port_in_use_is_one_line(
    module: str, tmp_path: Path, held_port: int, infra: Infra, database_url: str
) -> None:
    key = "edge.listen" if module == "ezat_edge" else "fetcher.metrics_listen"
    sections = one_simulator(held_port if module == "ezat_edge" else free_port(), free_port())
    if module == "ezat_fetcher":
        sections["fetcher"] = {"metrics_listen": listen(held_port)}
    config = write_config(tmp_path / "ports.toml", **sections)
    env = {
        **clean_env(tmp_path),
        "NATS_URL": infra.nats_url,
        "DATABASE_URL": database_url,
        "REDIS_URL": infra.redis_url,
    }
    done = service(module, config, env)
    one_line_refusal(done, f"{key}: 127.0.0.1:{held_port} is already in use")


def test_the_router_refuses_bedrock_without_credentials_before_connecting(tmp_path: Path) -> None:
    sections = one_simulator(free_port(), free_port())
    sections["deployments"] = [
        {
            "name": "bedrock-us",
            "model": SONNET,
            "kind": "bedrock",
            "region": "us-east-1",
            "model_id": "anthropic.claude-sonnet",
        }
    ]
    config = write_config(tmp_path / "bedrock.toml", **sections)
    env = {**clean_env(tmp_path), "NATS_URL": f"nats://127.0.0.1:{free_port()}"}  # nobody there
    done = service("ezat_router", config, env)
    one_line_refusal(done, "deployment `bedrock-us`", "AWS_ACCESS_KEY_ID")
