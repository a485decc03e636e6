"""Claude Code's WebSearch tool through the gateway (issue 31): Claude Code (unchanged) runs its
own search by sending Anthropic's web search server tool on the Messages API; the simulated
deployment searches (simulator/README.md, "Web search"), Claude Code reads the results back
into its turn, and the search is billed on the row of the request that ran it. Claude Code runs
with ``ENABLE_TOOL_SEARCH=false`` so that WebSearch's schema is in its requests (by default it is
a deferred tool the model must load first, a step the simulated model does not take)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from ezat_simulator.websearch import query_of, results_for
from support.claude_code import run_claude
from support.stack import create_key
from support.usage_rows import fetched

from .conftest import Gateway
from .test_claude_code import MODEL

# The simulated model calls Claude Code's WebSearch tool with {"query": "fjords"}, then answers.
PROMPT = "Search the web for me. [sim:tool=WebSearch arg=fjords]"


async def test_claude_codes_web_search_runs_through_the_gateway(
    gateway: Gateway, tmp_path: Path
) -> None:
    name = f"claude-search-{uuid.uuid4().hex[:8]}"
    secret = await create_key(gateway.database_url, name, user="dev-ana")
    # Every tool's schema in the request (no deferred tools), so the simulated model can call
    # WebSearch with its required query.
    done = run_claude(
        gateway.url,
        secret,
        tmp_path,
        PROMPT,
        model=MODEL,
        allowed="WebSearch",
        env={"ENABLE_TOOL_SEARCH": "false"},
    )
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-4000:]
    result = json.loads(done.stdout)
    assert result["is_error"] is False and result["result"].strip(), result
    bodies: list[dict[str, Any]] = [
        entry["body"]
        for sim in (gateway.sim_a, gateway.sim_b)
        for entry in await gateway.sim_requests(sim, 100)
    ]
    mine = [body for body in bodies if "fjords" in json.dumps(body["messages"])]
    (searching,) = [
        body
        for body in mine
        if any(str(t.get("type", "")).startswith("web_search_") for t in body.get("tools") or ())
    ]
    # Claude Code's own search request: the server tool alone, and the query it was asked for.
    (tool,) = searching["tools"]
    assert (tool["type"], tool["name"]) == ("web_search_20250305", "web_search"), tool
    asked = json.dumps(searching["messages"][-1])
    assert "fjords" in asked, asked
    # The pages the simulated deployment found came back into the main loop as WebSearch's
    # result (the simulator's results derive from the query alone).
    query = query_of(searching["messages"][-1]["content"][0]["text"], 0)
    found = [r["url"] for r in results_for(query, tool)]
    results = [
        block
        for body in mine
        for message in body["messages"]
        if message["role"] == "user" and isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]
    assert results and found[0] in json.dumps(results[-1]["content"]), results
    # Claude Code read the search's count, and the one search is billed once, on its row.
    assert result["modelUsage"][MODEL]["webSearchRequests"] == 1, result
    rows = await fetched(
        gateway.database_url,
        "SELECT u.web_search_requests FROM usage_records u"
        " JOIN api_keys k ON k.id = u.key_id WHERE k.name = $1",
        name,
        at_least=len(mine),
    )
    billed = sorted(row["web_search_requests"] for row in rows)
    assert sum(billed) == 1 and billed.count(1) == 1, billed
