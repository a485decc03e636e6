"""Claude Code (``@anthropic-ai/claude-code``, unchanged; ``make clients`` installs it) runs a
turn through the gateway's Messages API in print mode: it calls one of its own tools, then
answers, and its rows carry its client family and session (docs/billing.md, "Attribution")."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from support.claude_code import run_claude
from support.stack import create_key
from support.usage_rows import fetched

from .conftest import Gateway

MODEL = "claude-sonnet-5-5"
# The simulated model calls Claude Code's own Bash tool with {"command": "pwd"}, then answers.
PROMPT = "Where am I? Run the command for me. [sim:tool=Bash arg=pwd]"


async def test_claude_code_print_runs_its_tool_and_answers(
    gateway: Gateway, tmp_path: Path
) -> None:
    name = f"claude-code-{uuid.uuid4().hex[:8]}"
    secret = await create_key(gateway.database_url, name, user="dev-ana")
    session = str(uuid.uuid4())
    done = run_claude(
        gateway.url, secret, tmp_path, PROMPT, model=MODEL, allowed="Bash(pwd)", session=session
    )
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
    rows = await fetched(
        gateway.database_url,
        "SELECT u.client, u.session, u.user_name FROM usage_records u"
        " JOIN api_keys k ON k.id = u.key_id WHERE k.name = $1",
        name,
        at_least=2,
    )
    assert len(rows) == 2 and {row["client"] for row in rows} == {"claude-code"}, rows
    assert {row["session"] for row in rows} == {session}, rows
    # Its metadata.user_id is a device/session envelope, not a user: the key's user stays.
    assert {row["user_name"] for row in rows} == {"dev-ana"}, rows
