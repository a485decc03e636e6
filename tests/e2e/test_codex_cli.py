"""The Codex CLI (``@openai/codex``, unchanged; ``make clients`` installs it) at its default
configuration but for the provider: it reads its model's metadata from the gateway, runs a turn
through the Responses API calling one of its own tools, and searches the web with its built-in
``web_search`` tool, run by the deployment's web search (docs/responses.md, "Codex CLI")."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from ezat_common.codex_catalogue import INSTRUCTIONS
from support.usage_rows import fetched

from .conftest import Gateway

CODEX = Path(__file__).parents[2] / ".tools" / "codex" / "node_modules" / ".bin" / "codex"
# Codex finds its model's metadata by exact name: an alias as the catalogue spells it.
MODEL = "claude-sonnet-5.5"
# The simulated model calls Codex's own shell tool with {"cmd": "pwd"} without searching first,
# although Codex offers its web_search tool on every request (the simulator searches whenever
# the tool is there: simulator/README.md), then answers.
PROMPT = "Where am I? Run the command for me. [sim:tool=exec_command arg=pwd web_search=0]"
# With the web search tool present the simulated model searches once, then answers citing it.
SEARCH_PROMPT = "Search the web for the latest EZAT Router release and tell me what it brings."


def provider_config(url: str) -> str:
    """The README's provider block: Codex's own defaults otherwise (no web_search setting)."""
    return f"""
model = "{MODEL}"
model_provider = "ezat"

[model_providers.ezat]
name = "EZAT Router"
base_url = "{url}/openai/v1"
wire_api = "responses"
env_key = "EZAT_API_KEY"
model_catalog_url = "{url}/openai/v1/models"
"""


def run_codex(gateway: Gateway, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``codex exec ARGS`` in an empty working directory, its home in ``tmp_path``."""
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
    argv = [str(CODEX), "exec", "--skip-git-repo-check", "--ephemeral", "--cd", str(work), *args]
    done = subprocess.run(
        argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120
    )
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-4000:]
    # It read its model's metadata from the gateway's catalogue, not its fallback.
    assert "Model metadata for" not in said and "failed to refresh available models" not in said
    return done


async def rows_since(database_url: str, started: datetime.datetime) -> list[asyncpg.Record]:
    """The usage rows received since ``started``, once there are two."""
    sql = "SELECT client, session, web_search_requests FROM usage_records WHERE received_at >= $1"
    return await fetched(database_url, sql, started, at_least=2)


async def sent_with(gateway: Gateway, prompt: str) -> list[dict[str, Any]]:
    """The Messages requests the deployments received for ``prompt``."""
    return [
        entry["body"]
        for sim in (gateway.sim_a, gateway.sim_b)
        for entry in await gateway.sim_requests(sim, 100)
        if prompt in json.dumps(entry["body"].get("messages", []))
    ]


async def test_codex_exec_runs_its_tool_and_answers(gateway: Gateway, tmp_path: Path) -> None:
    started = datetime.datetime.now(datetime.UTC)
    argv = ["--sandbox", "workspace-write", "--color", "never", PROMPT]
    done = run_codex(gateway, tmp_path, *argv)
    said = done.stdout + done.stderr
    # Codex ran the call it got: its exec_command tool, in the working directory.
    assert "exec\n/bin/bash -lc pwd" in said, said[-4000:]
    # Its next request sent the command's output back as the tool result, and got an answer.
    sent = await sent_with(gateway, PROMPT)
    results = [
        block
        for body in sent
        for block in body["messages"][-1]["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]
    assert results and str(tmp_path / "work") in json.dumps(results[-1]["content"])
    # Its namespace tools (multi_agent_v1) reached the model flattened, its web_search tool as
    # the deployment's web search.
    assert any("__" in tool["name"] for tool in sent[0]["tools"])
    assert any(tool["name"] == "web_search" for tool in sent[0]["tools"]), sent[0]["tools"]
    # Its system prompt is the one the metadata carries (ezat_common/codex_instructions.md).
    assert INSTRUCTIONS[:80] in json.dumps(sent[0]["system"]), sent[0]["system"]
    assert "codex\n" in said  # its final answer followed
    # Its requests' rows carry its client family and its session_id header (docs/billing.md,
    # "Attribution"): one session for the turn's requests.
    rows = await rows_since(gateway.database_url, started)
    assert len(rows) >= 2 and {row["client"] for row in rows} == {"codex-cli"}, rows
    sessions = {row["session"] for row in rows}
    assert len(sessions) == 1 and None not in sessions, sessions


async def test_codex_searches_the_web_through_the_gateway(gateway: Gateway, tmp_path: Path) -> None:
    started = datetime.datetime.now(datetime.UTC)
    done = run_codex(gateway, tmp_path, "--json", SEARCH_PROMPT)
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    items = [e["item"] for e in events if e["type"] == "item.completed"]
    # The search it asked for ran, and Codex shows it as its own web search item.
    searches = [item for item in items if item["type"] == "web_search"]
    assert len(searches) == 1, items
    assert searches[0]["action"]["type"] == "search" and searches[0]["action"]["query"], searches
    # The answer followed the search, and the turn completed. The answer is one message,
    # though the deployment wrote it as a plain and a cited text block (one Responses message
    # item, as OpenAI's own searches answer): Codex shows it whole, as its last message.
    answers = [item for item in items if item["type"] == "agent_message"]
    assert len(answers) == 1 and answers[0]["text"].strip(), items
    assert items.index(searches[0]) < items.index(answers[0]), items
    assert events[-1]["type"] == "turn.completed", events[-1]
    # The deployment got Anthropic's web search server tool.
    (sent,) = await sent_with(gateway, SEARCH_PROMPT)
    kinds = {tool.get("type", "custom") for tool in sent["tools"]}
    assert any(kind.startswith("web_search_") for kind in kinds), kinds
    # One request, its search billed on its usage row.
    rows = await rows_since(gateway.database_url, started)
    assert [(row["client"], row["web_search_requests"]) for row in rows] == [("codex-cli", 1)]
