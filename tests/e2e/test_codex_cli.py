"""The Codex CLI (``@openai/codex``, unchanged; ``make clients`` installs it) runs a turn through
the gateway's Responses API: it calls one of its own tools, then answers (docs/responses.md,
"Codex CLI")."""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import subprocess
from pathlib import Path

import asyncpg
import pytest
from ezat_common.codex_catalogue import INSTRUCTIONS

from .conftest import Gateway

CODEX = Path(__file__).parents[2] / ".tools" / "codex" / "node_modules" / ".bin" / "codex"
# Codex finds its model's metadata by exact name: an alias as the catalogue spells it.
MODEL = "claude-sonnet-5.5"
# The simulated model calls Codex's own shell tool with {"cmd": "pwd"}, then answers.
PROMPT = "Where am I? Run the command for me. [sim:tool=exec_command arg=pwd]"


def provider_config(url: str) -> str:
    return f"""
model = "{MODEL}"
model_provider = "ezat"
model_reasoning_effort = "low"
web_search = "disabled"

[model_providers.ezat]
name = "EZAT Router"
base_url = "{url}/openai/v1"
wire_api = "responses"
env_key = "EZAT_API_KEY"
model_catalog_url = "{url}/openai/v1/models"
"""


async def test_codex_exec_runs_its_tool_and_answers(gateway: Gateway, tmp_path: Path) -> None:
    if not CODEX.exists():
        pytest.fail("the Codex CLI is missing: run `make clients` (needs npm)")
    home = tmp_path / "codex-home"
    home.mkdir()
    (home / "config.toml").write_text(provider_config(gateway.url))
    work = tmp_path / "work"
    work.mkdir()
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "CODEX_HOME": str(home),
        "EZAT_API_KEY": gateway.key,
    }
    started = datetime.datetime.now(datetime.UTC)
    done = subprocess.run(
        [
            str(CODEX),
            "exec",
            "--skip-git-repo-check",
            "--ephemeral",
            "--sandbox",
            "workspace-write",
            "--color",
            "never",
            "--cd",
            str(work),
            PROMPT,
        ],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-4000:]
    # It read its model's metadata from the gateway's catalogue, not its fallback.
    assert "Model metadata for" not in said and "failed to refresh available models" not in said
    # Codex ran the call it got: its exec_command tool, in the working directory.
    assert "exec\n/bin/bash -lc pwd" in said, said[-4000:]
    # Its next request sent the command's output back as the tool result, and got an answer.
    sent = [
        entry["body"]
        for sim in (gateway.sim_a, gateway.sim_b)
        for entry in await gateway.sim_requests(sim, 100)
        if PROMPT in json.dumps(entry["body"].get("messages", []))
    ]
    results = [
        block
        for body in sent
        for block in body["messages"][-1]["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]
    assert results and str(work) in json.dumps(results[-1]["content"])
    # Its namespace tools (multi_agent_v1) reached the model flattened.
    assert any("__" in tool["name"] for tool in sent[0]["tools"])
    # Its system prompt is the one the metadata carries (ezat_common/codex_instructions.md).
    assert INSTRUCTIONS[:80] in json.dumps(sent[0]["system"]), sent[0]["system"]
    assert "codex\n" in said  # its final answer followed
    # Its requests' rows carry its client family and its session_id header (docs/billing.md,
    # "Attribution"): one session for the turn's requests.
    conn = await asyncpg.connect(gateway.database_url)
    try:
        for _ in range(100):  # billing drains the outbox into PostgreSQL within milliseconds
            rows = await conn.fetch(
                "SELECT client, session FROM usage_records WHERE received_at >= $1", started
            )
            if len(rows) >= 2:
                break
            await asyncio.sleep(0.05)
    finally:
        await conn.close()
    assert len(rows) >= 2 and {row["client"] for row in rows} == {"codex-cli"}, rows
    sessions = {row["session"] for row in rows}
    assert len(sessions) == 1 and None not in sessions, sessions
