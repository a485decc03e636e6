"""Claude Code on a Bedrock deployment (docs/routing.md): its requests carry no server tool,
so its tool loop runs there; when its model calls WebSearch, the sub-request with Anthropic's web
search server tool gets the gateway's 400 in Anthropic's format (Bedrock has no such tool), which
Claude Code hands to the model as the tool's error, and the turn still completes."""

from __future__ import annotations

import json
from pathlib import Path

from support.claude_code import run_claude

from .conftest import Kinds

PROMPT = "What is new in EZAT Router? Search the web. [sim:tool=WebSearch arg=ezat-router]"
# WebSearch's schema up front (tests/e2e/test_claude_code_web_search.py says why).
SETTINGS = {"ENABLE_TOOL_SEARCH": "false"}


async def test_claude_code_completes_its_tool_loop_on_bedrock(gw: Kinds, tmp_path: Path) -> None:
    done = run_claude(
        gw.url, gw.key, tmp_path, PROMPT, model="bedrock-only", allowed="WebSearch", env=SETTINGS
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    result = json.loads(done.stdout)
    assert result["is_error"] is False and result["num_turns"] == 2, result
    assert result["result"].strip(), result
    latest = await gw.received("bedrock", 20)
    # WebSearch's sub-request (its prompt the query) never reached Bedrock: refused before.
    assert not any("query: ezat-router" in json.dumps(entry["body"]) for entry in latest)
    received = [entry for entry in latest if PROMPT in json.dumps(entry["body"]["messages"])]
    # Bedrock answered the loop's two requests (their tools Claude Code's own) and never got a
    # server tool. (Claude Code's first try carries a mid-conversation system message, which
    # Bedrock refuses with a 400; Claude Code then sends it again folded into the user turn.)
    turns = [entry["body"] for entry in received if entry["status"] == 200]
    assert len(turns) == 2, [body["messages"][-1] for body in turns]
    for entry in received:
        kinds = {tool.get("type", "custom") for tool in entry["body"].get("tools", [])}
        assert not any(kind.startswith("web_search") for kind in kinds), kinds
    # The search's 400, in Anthropic's words, reached the model as WebSearch's error.
    (error,) = [
        block
        for body in turns
        for block in body["messages"][-1]["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]
    assert error["is_error"] is True, error
    assert (
        "400 tools.0.type: web_search_20250305 is not available for model `bedrock-only` on any "
        "deployment of this gateway"
    ) in json.dumps(error["content"]), error
