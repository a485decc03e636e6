"""The tenancy commands as an operator runs them from a laptop: `ezat` as a subprocess with
only EZAT_URL and EZAT_OPERATOR_TOKEN, against the running edge's admin API (docs/tenancy.md,
"Onboarding a team"): teams, keys, rotation, revocation, apply, and the audit chain."""

from __future__ import annotations

import asyncio
import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import anthropic
import asyncpg
import pytest
from ezat_cli.infra import free_port

from .conftest import Gateway

EZAT = str(Path(sys.executable).parent / "ezat")
MODEL = "anthropic/claude-sonnet-5-5"


def laptop_env(gateway: Gateway, tmp: Path, **extra: str) -> dict[str, str]:
    """What an operator's shell has: the edge's URL and the operator token; no database, no
    NATS, and a data folder with nothing of `ezat up` in it."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_URL")}
    env.pop("EZAT_OPERATOR_TOKEN", None)
    env.update(
        EZAT_URL=gateway.url,
        EZAT_OPERATOR_TOKEN=gateway.stack.operator_token,
        EZAT_DATA_DIR=str(tmp / "nothing-here"),
        USER="op-e2e",
    )
    env.update(extra)
    return env


async def ezat(
    gateway: Gateway, tmp: Path, *args: str, **env: str
) -> subprocess.CompletedProcess[str]:
    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [EZAT, *args],
            env=laptop_env(gateway, tmp, **env),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    return await asyncio.to_thread(run)


async def ok(gateway: Gateway, tmp: Path, *args: str) -> str:
    out = await ezat(gateway, tmp, *args)
    assert out.returncode == 0, f"ezat {' '.join(args)}: {out.stderr}"
    assert "Traceback" not in out.stderr
    return out.stdout


async def answers(gateway: Gateway, secret: str) -> int:
    """The status of one small Messages call with ``secret`` (through the official SDK)."""
    async with gateway.anthropic(api_key=secret) as client:
        try:
            await client.messages.create(
                model="claude-sonnet-5-5",
                max_tokens=5,
                messages=[{"role": "user", "content": "cli admin"}],
            )
        except anthropic.APIStatusError as exc:
            return exc.status_code
    return 200


async def test_onboard_a_team_hand_out_rotate_and_revoke(gateway: Gateway, tmp_path: Path) -> None:
    made = await ok(
        gateway,
        tmp_path,
        "teams",
        "create",
        "--name",
        "cli-onboard",
        "--models",
        "claude-sonnet-5-5",
        "--rpm",
        "600",
        "--budget",
        "25",
    )
    team_id = made.split()[1]
    assert team_id.startswith("team_")
    listed = json.loads(await ok(gateway, tmp_path, "teams", "list", "--json"))
    [team] = [t for t in listed if t["id"] == team_id]
    assert team["models"] == [MODEL] and team["rpm"] == 600 and team["budget_usd"] == 25.0

    out = await ok(
        gateway,
        tmp_path,
        "keys",
        "create",
        "--name",
        "cli-zero",
        "--team",
        "cli-onboard",
        "--rpm",
        "0",
    )
    zero_secret = out.strip().splitlines()[-1]
    out = await ok(
        gateway,
        tmp_path,
        "keys",
        "create",
        "--name",
        "cli-svc",
        "--team",
        team_id,
        "--user",
        "alice@example.com",
        "--expires",
        "30d",
    )
    secret = out.strip().splitlines()[-1]
    assert secret.startswith("ezat_sk_")
    assert await answers(gateway, secret) == 200
    assert await answers(gateway, zero_secret) == 429  # rpm 0 refuses every request

    keys = json.loads(
        await ok(gateway, tmp_path, "keys", "list", "--team", "cli-onboard", "--json")
    )
    by_name = {k["name"]: k for k in keys}
    assert set(by_name) == {"cli-zero", "cli-svc"}
    assert by_name["cli-zero"]["rpm"] == 0  # truthful: 0 is 0
    assert by_name["cli-svc"]["rpm"] is None and by_name["cli-svc"]["user"] == "alice@example.com"
    text = await ok(gateway, tmp_path, "keys", "list", "--team", "cli-onboard")
    zero_line = next(ln for ln in text.splitlines() if "\tcli-zero\t" in ln)
    assert "rpm=0 " in zero_line and "rpm=-" not in text
    assert secret not in text and zero_secret not in text

    key_id = by_name["cli-svc"]["id"]
    out = await ok(gateway, tmp_path, "keys", "update", key_id, "--rpm", "50", "--budget", "none")
    assert "rpm=50" in out and "budget=none" in out
    out = await ok(gateway, tmp_path, "keys", "rotate", key_id, "--overlap", "1h")
    rotated = out.strip().splitlines()[-1]
    assert rotated.startswith("ezat_sk_") and rotated != secret
    assert await answers(gateway, rotated) == 200
    assert await answers(gateway, secret) == 200  # still inside its overlap

    await ok(gateway, tmp_path, "keys", "revoke", key_id)
    assert await answers(gateway, rotated) == 401
    await ok(gateway, tmp_path, "keys", "revoke", by_name["cli-zero"]["id"])
    out = await ok(gateway, tmp_path, "teams", "delete", "cli-onboard")
    assert team_id in out


async def test_enforcement_is_set_changed_and_cleared_by_the_cli(
    gateway: Gateway, tmp_path: Path
) -> None:
    made = await ok(
        gateway, tmp_path, "teams", "create", "--name", "cli-enf", "--budget", "9",
        "--enforcement", "fail_open", "--json",
    )  # fmt: skip
    team = json.loads(made)
    assert team["budget_enforcement"] == "fail_open"
    out = await ok(
        gateway, tmp_path, "keys", "create", "--name", "cli-enf-key", "--team", "cli-enf",
        "--budget", "1", "--enforcement", "fail_closed",
    )  # fmt: skip
    key_id = out.split()[1]
    key = json.loads(await ok(gateway, tmp_path, "keys", "get", key_id, "--json"))
    assert key["budget_enforcement"] == "fail_closed"
    line = await ok(gateway, tmp_path, "keys", "get", key_id)
    assert "budget=$1.00 enforcement=fail_closed" in line
    await ok(gateway, tmp_path, "keys", "update", key_id, "--enforcement", "fail_open")
    key = json.loads(await ok(gateway, tmp_path, "keys", "get", key_id, "--json"))
    assert key["budget_enforcement"] == "fail_open"
    cleared = await ok(
        gateway, tmp_path, "keys", "update", key_id, "--enforcement", "none", "--json"
    )
    assert json.loads(cleared)["budget_enforcement"] is None
    team = json.loads(
        await ok(gateway, tmp_path, "teams", "update", "cli-enf", "--enforcement", "none", "--json")
    )
    assert team["budget_enforcement"] is None and team["budget_usd"] == 9.0
    out = await ezat(gateway, tmp_path, "keys", "update", key_id, "--enforcement", "closed")
    assert out.returncode == 2
    assert out.stderr.strip() == (
        "ezat: --enforcement: `closed` is neither fail_closed nor fail_open, or none"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("keys", "create", "--name", "x", "--budget", "-1"),
            "ezat: --budget: must be an amount in USD ≥ 0, got -1",
        ),
        (
            ("keys", "create", "--name", "x", "--rpm", "-5"),
            "ezat: --rpm: must be ≥ 0 (0 refuses every request), got -5",
        ),
        (
            ("teams", "create", "--name", "x", "--tpm", "-1"),
            "ezat: --tpm: must be ≥ 0 (0 refuses every request), got -1",
        ),
        (
            ("keys", "update", "key_x", "--expires", "soon"),
            "ezat: --expires: `soon` is neither a duration (30d, 12h) nor an RFC 3339 time such "
            "as 2027-01-31T00:00:00Z, or never",
        ),
    ],
)
async def test_bad_values_are_refused_in_one_line_before_any_call(
    gateway: Gateway, tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    # Nothing listens at this address: a call would say so instead.
    out = await ezat(gateway, tmp_path, *args, EZAT_URL=f"http://127.0.0.1:{free_port()}")
    assert out.returncode == 2
    assert out.stderr.strip() == message
    assert out.stdout == ""


async def test_unreachable_edge_and_wrong_token_are_one_line_each(
    gateway: Gateway, tmp_path: Path
) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    out = await ezat(gateway, tmp_path, "keys", "list", EZAT_URL=dead)
    assert out.returncode == 1
    assert out.stderr.startswith(f"ezat: cannot reach the admin API at {dead}")
    assert "EZAT_URL" in out.stderr and out.stderr.count("\n") == 1
    out = await ezat(gateway, tmp_path, "teams", "list", EZAT_OPERATOR_TOKEN="not-the-token")
    assert out.returncode == 1 and out.stderr.count("\n") == 1
    assert "EZAT_OPERATOR_TOKEN" in out.stderr and "Traceback" not in out.stderr


TENANCY = """
[[teams]]
name = "apply-{tag}"
models = ["{model}"]
rpm = {rpm}
budget_usd = 100.0
budget_enforcement = "fail_open"

[[keys]]
name = "svc"
team = "apply-{tag}"
user = "bob"
tpm = 0
expires_at = 2030-01-01T00:00:00Z

[[keys]]
name = "batch"
team = "apply-{tag}"
budget_usd = 5
budget_enforcement = "fail_closed"
"""


def tenancy(tmp: Path, tag: str, rpm: int) -> Path:
    path = tmp / f"tenancy-{rpm}.toml"
    # An alias: the API stores the id, and the next apply still finds no change.
    path.write_text(TENANCY.format(tag=tag, model="Claude-Sonnet-5.5", rpm=rpm))
    return path


async def snapshot(gateway: Gateway, tmp: Path) -> tuple[Any, Any]:
    teams = json.loads(await ok(gateway, tmp, "teams", "list", "--json"))
    keys = json.loads(await ok(gateway, tmp, "keys", "list", "--json"))
    return teams, keys


async def test_apply_converges_once_and_dry_run_changes_nothing(
    gateway: Gateway, tmp_path: Path
) -> None:
    first = tenancy(tmp_path, "a", rpm=300)
    before = await snapshot(gateway, tmp_path)
    plan = await ok(gateway, tmp_path, "apply", "-f", str(first), "--dry-run")
    assert plan.splitlines()[0] == "plan (3 changes; dry run, nothing changed):"
    assert "  create team apply-a" in plan and "create key apply-a/svc" in plan
    assert await snapshot(gateway, tmp_path) == before

    applied = await ok(gateway, tmp_path, "apply", "-f", str(first))
    lines = applied.splitlines()
    assert lines[0].startswith("create team apply-a")
    secrets = [ln for ln in lines if ln.startswith("ezat_sk_")]
    assert len(secrets) == 2
    svc, batch = secrets  # in the file's order
    assert await answers(gateway, batch) == 200  # no limit of its own
    assert await answers(gateway, svc) == 429  # tpm = 0: the file's limits reached the edge
    assert await ok(gateway, tmp_path, "apply", "-f", str(first)) == "no changes\n"
    after = await snapshot(gateway, tmp_path)
    [team] = [t for t in after[0] if t["name"] == "apply-a"]
    assert team["budget_enforcement"] == "fail_open"
    enforced = {k["name"]: k["budget_enforcement"] for k in after[1] if k["team"] == team["id"]}
    assert enforced == {"svc": None, "batch": "fail_closed"}

    second = tenancy(tmp_path, "a", rpm=301)
    plan = await ok(gateway, tmp_path, "apply", "-f", str(second), "--dry-run")
    assert "update team apply-a" in plan and "rpm 300 -> 301" in plan
    assert await snapshot(gateway, tmp_path) == after
    applied = await ok(gateway, tmp_path, "apply", "-f", str(second))
    assert "rpm 300 -> 301" in applied and "ezat_sk_" not in applied
    assert await ok(gateway, tmp_path, "apply", "-f", str(second)) == "no changes\n"


async def test_apply_writes_new_secrets_to_a_private_kubernetes_secret(
    gateway: Gateway, tmp_path: Path
) -> None:
    out_file = tmp_path / "k8s.yaml"
    applied = await ok(
        gateway,
        tmp_path,
        "apply",
        "-f",
        str(tenancy(tmp_path, "k", rpm=10)),
        "--secrets-out",
        str(out_file),
    )
    assert "ezat_sk_" not in applied
    assert stat.S_IMODE(out_file.stat().st_mode) == 0o600
    import yaml

    doc = yaml.safe_load(out_file.read_text())
    assert doc["kind"] == "Secret"
    assert set(doc["stringData"]) == {"apply-k.svc", "apply-k.batch"}
    assert await answers(gateway, doc["stringData"]["apply-k.batch"]) == 200


async def test_audit_verify_passes_and_names_a_tampered_row(
    gateway: Gateway, tmp_path: Path
) -> None:
    await ok(gateway, tmp_path, "teams", "create", "--name", "audit-probe", "--rpm", "1")
    await ok(gateway, tmp_path, "teams", "update", "audit-probe", "--rpm", "2")
    out = await ok(gateway, tmp_path, "audit", "verify")
    assert out.startswith("audit chain verified: ")
    entries = json.loads(await ok(gateway, tmp_path, "audit", "list", "--json"))
    [update] = [
        e
        for e in entries
        if e["action"].endswith("update") and e["after"] and e["after"].get("name") == "audit-probe"
    ]
    assert update["actor"].endswith("op-e2e")
    # a key's 12-character prefix, never more of a secret
    assert not re.search(r"ezat_sk_[A-Za-z0-9_-]{5,}", json.dumps(entries))

    conn = await asyncpg.connect(gateway.database_url)
    try:
        original = await conn.fetchval("SELECT after FROM audit_log WHERE seq = $1", update["seq"])
        await conn.execute(
            "UPDATE audit_log SET after = jsonb_set(after, '{rpm}', '2000') WHERE seq = $1",
            update["seq"],
        )
        out = await ezat(gateway, tmp_path, "audit", "verify")
        assert out.returncode == 1
        assert f"at seq {update['seq']}" in out.stderr
    finally:
        await conn.execute(
            "UPDATE audit_log SET after = $2::jsonb WHERE seq = $1", update["seq"], original
        )
        await conn.close()
    await ok(gateway, tmp_path, "audit", "verify")


async def test_apply_refuses_a_model_the_gateway_lacks_before_changing_anything(
    gateway: Gateway, tmp_path: Path
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(TENANCY.format(tag="bad", model="no-such-model", rpm=1))
    before = await snapshot(gateway, tmp_path)
    for extra in (["--dry-run"], []):
        out = await ezat(gateway, tmp_path, "apply", "-f", str(path), *extra)
        assert out.returncode == 1
        assert out.stderr == (
            "ezat: team apply-bad: no model `no-such-model` in the gateway's catalogue "
            "(GET /api/models lists them)\n"
        )
    assert await snapshot(gateway, tmp_path) == before
