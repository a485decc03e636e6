"""The OpenAI Agents SDK (``openai-agents``, unchanged) runs an agent with a function tool
through the gateway's Responses API (docs/responses.md)."""

from __future__ import annotations

from agents import Agent, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled

from .conftest import Gateway


async def test_an_agent_with_a_function_tool_completes(gateway: Gateway) -> None:
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
        model=OpenAIResponsesModel(model="Claude-Sonnet-5.5", openai_client=gateway.openai()),
    )
    result = await Runner.run(agent, "What's the weather in Oslo? [sim:tool=get_weather]")
    assert asked == ["Oslo"]
    assert isinstance(result.final_output, str) and result.final_output
    # The second turn carried the tool's output back, matched by its call id.
    calls = [i for i in result.new_items if i.type == "tool_call_item"]
    outputs = [i for i in result.new_items if i.type == "tool_call_output_item"]
    assert len(calls) == len(outputs) == 1
