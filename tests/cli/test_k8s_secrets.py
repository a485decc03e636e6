"""`ezat k8s secrets` (deploy/k8s/README.md, "Secrets to create"), run as an operator would: at
a terminal (a pty, answers typed at non-echoing prompts) and piped, with a stand-in kubectl that
records what it is given. No value ever reaches the terminal; the YAML holds each one.
(That it covers exactly the manifests' Secrets: tests/deploy/test_k8s_day_one.py.)
"""

from __future__ import annotations

import base64
import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from ezat_cli import k8s_secrets

EZAT = str(Path(sys.executable).parent / "ezat")
FAKE_KUBECTL = """#!/bin/sh
echo "$*" >> "$KUBECTL_LOG/args"
if [ "$1" = "apply" ]; then cat > "$KUBECTL_LOG/applied.yaml"; echo "applied"; fi
if [ "$1" = "get" ]; then printf "%s" "$KUBECTL_EXISTING"; fi
"""
GIVEN = {  # what the operator exported; the rest is typed or generated
    "REDIS_URL": "redis://:redispw-5e1f@redis.internal:6379/0",
    "EZAT_SEAL_KEYS": "seal-1:c2VhbGtleXNlYWxrZXlzZWFsa2V5c2VhbGtleTE=",
    "ANTHROPIC_API_KEY_US": "sk-ant-us-7f3a9c",
    "ANTHROPIC_API_KEY_US_GW": "sk-ant-usgw-1b2c3d",
    "ANTHROPIC_API_KEY_EU": "sk-ant-eu-4e5f6a",
}
TYPED = {
    "DATABASE_URL": "postgresql://ezat:dbpw-91c2@pg.internal/ezat",
    "ANTHROPIC_API_KEY_EU_GW": "sk-ant-eugw-typed-8d7e",
}


def setup(tmp_path: Path, existing: str = "") -> dict[str, str]:
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "kubectl").write_text(FAKE_KUBECTL)
    (bin_ / "kubectl").chmod(0o755)
    (tmp_path / "log").mkdir()
    # A local `ezat up`'s data folder, whose URLs must never reach a cluster's Secret.
    data = tmp_path / "data"
    data.mkdir()
    (data / "infra.json").write_text(json.dumps({"DATABASE_URL": "postgresql://local/ezat"}))
    return {
        "PATH": f"{bin_}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "EZAT_DATA_DIR": str(data),
        "KUBECTL_LOG": str(tmp_path / "log"),
        "KUBECTL_EXISTING": existing,
        **GIVEN,
    }


def secrets_of(text: str) -> dict[str, dict[str, str]]:
    out = {}
    for d in yaml.safe_load_all(text):
        assert d["kind"] == "Secret" and d["metadata"]["namespace"] == "ezat"
        out[d["metadata"]["name"]] = {k: base64.b64decode(v).decode() for k, v in d["data"].items()}
    return out


def every_value(secrets: dict[str, dict[str, str]]) -> list[str]:
    values = [v for s in secrets.values() for v in s.values()]
    return values + [base64.b64encode(v.encode()).decode() for v in values]


def run_in_pty(argv: list[str], env: dict[str, str], answers: dict[str, str]) -> tuple[int, str]:
    """``argv`` on a terminal of its own; each prompt naming a key of ``answers`` is answered.
    Returns the exit status and everything the terminal showed."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: the pty is its controlling terminal, as in a shell
        os.execve(argv[0], argv, env)
    shown, pending, deadline = b"", dict(answers), time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            shown += chunk
        for env_name, value in list(pending.items()):
            if f"${env_name};".encode() in shown and shown.rstrip().endswith(b":"):
                os.write(fd, value.encode() + b"\n")
                del pending[env_name]
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), shown.decode(errors="replace")


def test_typed_values_are_never_echoed_and_are_applied(tmp_path: Path) -> None:
    env = setup(tmp_path)
    answers = {**TYPED, "EZAT_BUDGET_REDIS_URL": ""}  # Enter: the optional Secret left out
    code, shown = run_in_pty(
        [EZAT, "k8s", "secrets", "--generate", "--skip", "nats-tls", "--apply"], env, answers
    )
    assert code == 0, shown
    applied = secrets_of((tmp_path / "log" / "applied.yaml").read_text())
    # Every Secret but the skipped and the left-out optional one, each value where it belongs.
    assert set(applied) == {s.name for s in k8s_secrets.CATALOG} - {
        "nats-tls",
        "ezat-budget-redis",
    }
    assert applied["ezat-database"]["url"] == TYPED["DATABASE_URL"]
    assert applied["ezat-provider-keys"]["ANTHROPIC_API_KEY_EU_GW"] == "sk-ant-eugw-typed-8d7e"
    assert applied["ezat-redis"]["url"] == GIVEN["REDIS_URL"]
    users = applied["ezat-nats-users"]
    assert set(users) == {"edge", "translator", "router", "billing", "fetcher", "cli", "system"}
    assert len(set(users.values())) == 7
    for service in k8s_secrets.SERVICES:
        url = applied[f"ezat-{service}-nats"]["url"]
        assert url == k8s_secrets.nats_url(service, users[service]), service
        assert url.count(f"tls://{service}:{users[service]}@nats-") == 3
    assert len(applied["ezat-operator"]["token"]) >= 32
    # What the terminal showed: the prompts and which Secret got what from where, no value.
    for value in every_value(applied):
        assert value not in shown, "a value reached the terminal"
    assert "secret/ezat-database: url (typed)" in shown
    assert "secret/ezat-budget-redis left out" in shown
    args = (tmp_path / "log" / "args").read_text().splitlines()
    assert args[0].startswith("get secret -n ezat --ignore-not-found -o name ezat-nats-users")
    assert args[1] == "apply --server-side --field-manager=ezat-cli --force-conflicts -f -"


def test_piped_answers_give_yaml_on_stdout_only(tmp_path: Path) -> None:
    env = setup(tmp_path)
    env |= {
        f"NATS_{u.upper()}_PASSWORD": f"Given{u}0123456789abcdefghijklmnopqrstuv"
        for u in ("edge", "translator", "router", "billing", "fetcher", "cli", "system")
    }
    crt, key, ca = (tmp_path / n for n in ("tls.crt", "tls.key", "ca.crt"))
    for f in (crt, key, ca):
        f.write_text(f"-----BEGIN {f.name}-----\n")
    env |= {"EZAT_NATS_TLS_CRT_FILE": str(crt), "EZAT_NATS_TLS_KEY_FILE": str(key)}
    typed = [str(ca), TYPED["DATABASE_URL"], "", "redis://global.internal:6379", "sk-typed-eu"]
    done = subprocess.run(
        [EZAT, "k8s", "secrets", "-o", "yaml", "-n", "ezat"],
        input="\n".join(typed) + "\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    out = secrets_of(done.stdout)
    assert out["nats-tls"] == {f.name: f.read_text() for f in (crt, key, ca)}
    assert out["ezat-database"]["url"] == TYPED["DATABASE_URL"]  # not the local stack's
    assert "ezat-operator" not in out  # optional, Enter, no --generate
    assert out["ezat-budget-redis"]["url"] == "redis://global.internal:6379"
    assert out["ezat-edge-nats"]["url"].startswith("tls://edge:Givenedge0123")
    for value in every_value(out):
        assert value not in done.stderr
    assert not (tmp_path / "log" / "args").exists()  # -o yaml never calls kubectl


def run(argv: list[str], env: dict[str, str], stdin: str = "") -> Any:
    return subprocess.run(
        [EZAT, "k8s", "secrets", *argv], input=stdin, capture_output=True, text=True, env=env
    )


def test_existing_secrets_are_not_replaced_without_overwrite(tmp_path: Path) -> None:
    env = setup(tmp_path, existing="secret/ezat-database\nsecret/ezat-nats-users\n")
    done = run(["--generate", "--skip", "nats-tls", "--apply"], env)
    assert done.returncode == 2
    assert "exist in ezat: ezat-database, ezat-nats-users" in done.stderr
    assert "--overwrite" in done.stderr
    assert not (tmp_path / "log" / "applied.yaml").exists()


def test_refusals_name_what_is_missing_and_print_nothing(tmp_path: Path) -> None:
    env = setup(tmp_path)
    # A required value given none: refused, naming its variable; nothing on stdout.
    done = run(["--generate", "--skip", "nats-tls", "-o", "yaml"], env, stdin="\n")
    assert done.returncode == 2 and done.stdout == ""
    assert "ezat-database/url has no value: set $DATABASE_URL" in done.stderr
    # A NATS password that auth.conf would misread.
    env |= {"NATS_EDGE_PASSWORD": "short-pw"}
    done = run(["--skip", "nats-tls", "-o", "yaml"], env, stdin="")
    assert done.returncode == 2 and done.stdout == ""
    assert "ezat-nats-users/edge: a NATS password is alphanumeric" in done.stderr
    assert "short-pw" not in done.stderr
    # --apply without kubectl on PATH; neither --apply nor -o: a usage error.
    done = run(["--apply"], {**env, "PATH": "/nonexistent"})
    assert done.returncode == 2 and "kubectl is not on PATH" in done.stderr
    assert run([], env).returncode == 2


def test_generated_nats_passwords_fit_auth_conf() -> None:
    passwords = {k8s_secrets.nats_password() for _ in range(200)}
    assert len(passwords) == 200
    for p in passwords:
        assert p.isalnum() and p.isascii() and p[0].isalpha() and len(p) == 43
