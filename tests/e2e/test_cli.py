"""The `ezat` CLI against the test stack: keys (through the admin API), usage, migrate."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import aiohttp

from .conftest import Gateway

EZAT = str(Path(sys.executable).parent / "ezat")


def ezat(gateway: Gateway, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **gateway.stack.env(), "EZAT_URL": gateway.url}  # the admin API
    return subprocess.run(
        [EZAT, *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )


async def test_key_lifecycle(gateway: Gateway, http: aiohttp.ClientSession) -> None:
    created = await asyncio.to_thread(ezat, gateway, "keys", "create", "--name", "cli-test")
    assert created.returncode == 0, created.stderr
    secret = created.stdout.strip().splitlines()[-1]
    assert secret.startswith("ezat_sk_")
    assert len(secret) >= 40

    body = {
        "model": "claude-sonnet-5-5",
        "max_tokens": 5,
        "messages": [{"role": "user", "content": "x"}],
    }
    async with http.post(
        gateway.url + "/v1/messages", json=body, headers={"x-api-key": secret}
    ) as r:
        assert r.status == 200

    listed = await asyncio.to_thread(ezat, gateway, "keys", "list")
    line = next(ln for ln in listed.stdout.splitlines() if "cli-test" in ln)
    key_id = line.split("\t")[0]
    assert secret not in listed.stdout  # shown once, never again

    revoked = await asyncio.to_thread(ezat, gateway, "keys", "revoke", key_id)
    assert revoked.returncode == 0, revoked.stderr
    async with http.post(
        gateway.url + "/v1/messages", json=body, headers={"x-api-key": secret}
    ) as r:
        assert r.status == 401
        data = await r.json()
    assert data["error"]["type"] == "authentication_error"


async def test_keys_are_stored_only_hashed(gateway: Gateway) -> None:
    created = await asyncio.to_thread(ezat, gateway, "keys", "create", "--name", "hash-check")
    secret = created.stdout.strip().splitlines()[-1]
    import asyncpg

    conn = await asyncpg.connect(gateway.database_url)
    try:
        rows = await conn.fetch("SELECT * FROM api_keys")
    finally:
        await conn.close()
    dump = repr([dict(r) for r in rows])
    assert secret not in dump
    assert secret[12:] not in dump


async def test_usage_lists_request_ids(gateway: Gateway) -> None:
    client = gateway.anthropic()
    raw = await client.messages.with_raw_response.create(
        model="claude-sonnet-5-5", max_tokens=5, messages=[{"role": "user", "content": "cli usage"}]
    )
    rid = raw.headers["request-id"]
    out = await asyncio.to_thread(ezat, gateway, "usage")
    assert out.returncode == 0, out.stderr
    assert any(rid in line for line in out.stdout.splitlines())


async def test_migrate_is_idempotent(gateway: Gateway) -> None:
    out = await asyncio.to_thread(ezat, gateway, "migrate")
    assert out.returncode == 0, out.stderr
    assert "up to date" in out.stdout


async def test_bad_config_names_the_key_and_file(tmp_path: Path, gateway: Gateway) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[edge]\nlisten = 8080\n")
    out = await asyncio.to_thread(ezat, gateway, "up", "--config", str(bad))
    assert out.returncode == 2
    assert f"{bad}: edge.listen: Expected `str`, got `int`" in out.stderr


async def test_usage_since_filters_and_a_bad_time_is_a_usage_error(gateway: Gateway) -> None:
    out = await asyncio.to_thread(ezat, gateway, "usage", "--since", "2999-01-01T00:00:00Z")
    assert out.returncode == 0, out.stderr
    assert out.stdout == ""  # nothing was received in 2999
    out = await asyncio.to_thread(ezat, gateway, "usage", "--since", "yesterday")
    assert out.returncode == 2
    assert "argument --since: `yesterday` is not an RFC 3339 time" in out.stderr
    assert "Traceback" not in out.stderr
