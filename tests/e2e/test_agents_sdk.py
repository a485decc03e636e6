"""The OpenAI Agents SDK (``openai-agents``, unchanged) runs an agent with a function tool
through the gateway's Responses API (docs/responses.md)."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
from agents import Agent, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled

from .conftest import Gateway


async def test_an_agent_with_a_function_tool_completes(gateway: Gateway, new_key: Any) -> None:
    key = await new_key("agents-sdk")
    set_tracing_disabled(True)  # its traces would go to OpenAI
    asked: list[str] = []

    @function_tool
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        asked.append(city)
        return f"9 C in {city}"

    agent = Agent(
        name="weather",
        instructions="Answer with the weather tool.",
        tools=[get_weather],
        model=OpenAIResponsesModel(
            model="Claude-Sonnet-5.5", openai_client=gateway.openai(api_key=key)
        ),
    )
    result = await Runner.run(agent, "What's the weather in Oslo? [sim:tool=get_weather]")
    assert asked == ["Oslo"]
    assert isinstance(result.final_output, str) and result.final_output
    # The second turn carried the tool's output back, matched by its call id.
    calls = [i for i in result.new_items if i.type == "tool_call_item"]
    outputs = [i for i in result.new_items if i.type == "tool_call_output_item"]
    assert len(calls) == len(outputs) == 1
    # Its rows say which client made them (docs/billing.md, "Attribution").
    conn = await asyncpg.connect(gateway.database_url)
    try:
        for _ in range(100):  # billing drains the outbox into PostgreSQL within milliseconds
            rows = await conn.fetch(
                "SELECT u.client FROM usage_records u JOIN api_keys k ON k.id = u.key_id"
                " WHERE k.name = 'agents-sdk' AND u.received_at > now() - interval '5 minutes'"
            )
            if len(rows) >= 2:
                break
            await asyncio.sleep(0.05)
    finally:
        await conn.close()
    assert [row["client"] for row in rows] == ["openai-agents"] * len(rows) and len(rows) >= 2
