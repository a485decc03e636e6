"""Claude Code (``@anthropic-ai/claude-code``, unchanged; ``make clients`` installs it) runs a
turn through the gateway's Messages API in print mode: it calls one of its own tools, then
answers, and its rows carry its client family and session (docs/billing.md, "Attribution")."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import uuid
from pathlib import Path

import asyncpg
import pytest
from support.stack import create_key

from .conftest import Gateway

CLAUDE = Path(__file__).parents[2] / ".tools" / "claude-code" / "node_modules" / ".bin" / "claude"
MODEL = "claude-sonnet-5-5"
# The simulated model calls Claude Code's own Bash tool with {"command": "pwd"}, then answers.
PROMPT = "Where am I? Run the command for me. [sim:tool=Bash arg=pwd]"
# Nothing but the API: no telemetry, error reports, auto-update or other calls home, and the
# background ("Haiku") model is the gateway's too.
QUIET = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_BUG_COMMAND": "1",
    "ANTHROPIC_SMALL_FAST_MODEL": MODEL,
    "ANTHROPIC_DEFAULT_HAIKU_MODEL": MODEL,
}


async def rows_of(database_url: str, key_name: str, at_least: int) -> list[asyncpg.Record]:
    """The usage rows of the key called ``key_name``, once there are ``at_least`` (billing drains
    the outbox into PostgreSQL within milliseconds)."""
    conn = await asyncpg.connect(database_url)
    try:
        for _ in range(100):
            rows = await conn.fetch(
                "SELECT u.* FROM usage_records u"
                " JOIN api_keys k ON k.id = u.key_id WHERE k.name = $1",
                key_name,
            )
            if len(rows) >= at_least:
                break
            await asyncio.sleep(0.05)
    finally:
        await conn.close()
    return list(rows)


def run_claude(
    url: str,
    secret: str,
    session: str,
    tmp_path: Path,
    *,
    prompt: str = PROMPT,
    allowed: str = "Bash(pwd)",
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``claude -p`` in an empty working directory, its HOME in ``tmp_path``, allowed to run
    ``allowed`` (``pwd``) and nothing else; ``env`` adds to its environment."""
    work = tmp_path / "work"
    work.mkdir()
    full = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "ANTHROPIC_BASE_URL": url,
        "ANTHROPIC_API_KEY": secret,
        **QUIET,
        **(env or {}),
    }
    argv = [str(CLAUDE), "-p", prompt, "--model", MODEL, "--session-id", session]
    argv += ["--allowedTools", allowed, "--output-format", "json"]
    return subprocess.run(
        argv,
        cwd=work,
        env=full,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


async def test_claude_code_print_runs_its_tool_and_answers(
    gateway: Gateway, tmp_path: Path
) -> None:
    if not CLAUDE.exists():
        pytest.fail("Claude Code is missing: run `make clients` (needs npm)")
    name = f"claude-code-{uuid.uuid4().hex[:8]}"
    secret = await create_key(gateway.database_url, name, user="dev-ana")
    session = str(uuid.uuid4())
    done = run_claude(gateway.url, secret, session, tmp_path)
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-4000:]
    result = json.loads(done.stdout)
    # Two turns: the tool call, then the answer after the tool's output; the answer printed.
    assert result["is_error"] is False and result["num_turns"] == 2, result
    assert result["result"].strip(), result
    assert result["session_id"] == session, result
    # Claude Code ran the call it got, its Bash tool in its working directory, and sent the
    # output back as the tool result of its second request.
    sent = [
        entry["body"]
        for sim in (gateway.sim_a, gateway.sim_b)
        for entry in await gateway.sim_requests(sim, 100)
        if PROMPT in json.dumps(entry["body"]["messages"])
    ]
    results = [
        block
        for body in sent
        for message in body["messages"]
        if message["role"] == "user" and isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]
    assert results and str(tmp_path / "work") in json.dumps(results[-1]["content"]), sent
    # Both requests' rows carry its client family (its User-Agent is claude-cli/…) and the session
    # it sent in x-claude-code-session-id.
    rows = await rows_of(gateway.database_url, name, 2)
    assert len(rows) == 2 and {row["client"] for row in rows} == {"claude-code"}, rows
    assert {row["session"] for row in rows} == {session}, rows
    # Its metadata.user_id is a device/session envelope, not a user: the key's user stays.
    assert {row["user_name"] for row in rows} == {"dev-ana"}, rows
