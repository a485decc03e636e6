"""The simulator's web search server tool (simulator/README.md, "Web search"), read by the official
``anthropic`` SDK into its typed blocks, JSON and streamed, on the Anthropic and Vertex faces;
Bedrock refuses the tool as Bedrock does."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import anthropic
import pytest
from anthropic.types import (
    CitationsWebSearchResultLocation,
    Message,
    ServerToolUseBlock,
    TextBlock,
    WebSearchResultBlock,
    WebSearchToolResultBlock,
    WebSearchToolResultError,
)
from botocore.exceptions import ClientError

from .conftest import Running
from .test_bedrock_face import bedrock, error_of, invoke, invoke_body  # noqa: F401
from .test_vertex_face import MODEL as VERTEX_MODEL
from .test_vertex_face import VERSION as VERTEX_VERSION
from .test_vertex_face import Vertex, make_vertex, vertex  # noqa: F401

pytestmark = pytest.mark.asyncio(loop_scope="function")

MODEL = "claude-sonnet-4-6"
TOOL: dict[str, Any] = {"type": "web_search_20250305", "name": "web_search"}


def ask(text: str = "what changed in python 3.14", **tool: Any) -> dict[str, Any]:
    return {
        "model": MODEL,
        "max_tokens": 64,
        "messages": [{"role": "user", "content": text}],
        "tools": [{**TOOL, **tool}],
    }


def searches(message: Message) -> list[tuple[ServerToolUseBlock, WebSearchToolResultBlock]]:
    """The (call, result) pairs of ``message``, checking each result answers the call before."""
    pairs = []
    blocks = message.content
    for i, block in enumerate(blocks):
        if isinstance(block, ServerToolUseBlock):
            result = blocks[i + 1]
            assert isinstance(result, WebSearchToolResultBlock), blocks
            assert result.tool_use_id == block.id
            pairs.append((block, result))
    return pairs


def citations(message: Message) -> list[CitationsWebSearchResultLocation]:
    found = []
    for block in message.content:
        if isinstance(block, TextBlock) and block.citations:
            for citation in block.citations:
                assert isinstance(citation, CitationsWebSearchResultLocation), citation
                found.append(citation)
    return found


def check_searched(message: Message, count: int) -> None:
    """One search: its query from the prompt, results whose first is what the text cites."""
    pairs = searches(message)
    assert len(pairs) == count
    call, result = pairs[0]
    assert call.name == "web_search" and call.id.startswith("srvtoolu_")
    assert call.input == {"query": "what changed in python 3.14"}
    assert isinstance(result.content, list) and result.content
    assert all(isinstance(r, WebSearchResultBlock) for r in result.content)
    assert all(r.url.startswith("https://") and r.encrypted_content for r in result.content)
    (cited,) = citations(message)
    assert (cited.url, cited.title) == (result.content[0].url, result.content[0].title)
    assert cited.encrypted_index and 0 < len(cited.cited_text) <= 150
    assert isinstance(message.content[-1], TextBlock)
    assert message.usage.server_tool_use is not None
    assert message.usage.server_tool_use.web_search_requests == count


async def test_a_search_comes_back_as_the_sdks_typed_blocks(sim: Running) -> None:
    message = await sim.client.messages.create(**ask())
    check_searched(message, 1)
    assert message.stop_reason == "end_turn"


async def test_the_stream_accumulates_to_the_same_message(sim: Running) -> None:
    body = await sim.client.messages.create(**ask())
    seen: list[str] = []
    async with sim.client.messages.stream(**ask()) as stream:
        async for event in stream:
            seen.append(event.type)
        streamed = await stream.get_final_message()
    check_searched(streamed, 1)
    assert "citation" in seen  # the SDK's event for a citations_delta
    # The same blocks, but for the ids numbered by the simulator's message sequence.
    assert [b.type for b in streamed.content] == [b.type for b in body.content]
    assert citations(streamed) == citations(body)
    assert searches(streamed)[0][1].content == searches(body)[0][1].content
    assert streamed.usage.server_tool_use == body.usage.server_tool_use


async def test_results_are_derived_from_the_query(sim: Running) -> None:
    first = await sim.client.messages.create(**ask())
    again = await sim.client.messages.create(**ask())
    other = await sim.client.messages.create(**ask("the tallest building in oslo"))
    assert searches(first)[0][1].content == searches(again)[0][1].content
    assert searches(first)[0][1].content != searches(other)[0][1].content


async def test_over_max_uses_the_next_search_is_the_max_uses_error(sim: Running) -> None:
    message = await sim.client.messages.create(
        **ask("what changed in python 3.14 [sim:web_search=3]", max_uses=2)
    )
    pairs = searches(message)
    assert [call.input for call, _ in pairs] == [
        {"query": "what changed in python 3.14"},
        {"query": "what changed in python 3.14 (2)"},
        {"query": "what changed in python 3.14 (3)"},
    ]
    error = pairs[2][1].content
    assert isinstance(error, WebSearchToolResultError) and error.error_code == "max_uses_exceeded"
    assert message.usage.server_tool_use is not None
    assert message.usage.server_tool_use.web_search_requests == 2  # the refused one is free
    # The request log says so too (the fault suite checks billing against it).
    (logged,) = await sim.requests(1)
    assert logged["server_tool_use"]["web_search_requests"] == 2


async def test_allowed_domains_limit_the_results(sim: Running) -> None:
    allowed = ["docs.python.org", "peps.python.org"]
    message = await sim.client.messages.create(**ask(allowed_domains=allowed))
    hosts = {urlsplit(r.url).hostname for r in searches(message)[0][1].content}  # type: ignore[union-attr]
    assert hosts == set(allowed)


async def test_blocked_domains_are_left_out(sim: Running) -> None:
    plain = await sim.client.messages.create(**ask())
    results = searches(plain)[0][1].content
    assert isinstance(results, list)
    blocked = urlsplit(results[0].url).hostname
    assert blocked is not None
    message = await sim.client.messages.create(**ask(blocked_domains=[blocked]))
    left = searches(message)[0][1].content
    assert isinstance(left, list) and left
    assert blocked not in {urlsplit(r.url).hostname for r in left}


async def test_the_sdks_newer_tool_versions_search_too(sim: Running) -> None:
    for version in ("web_search_20260209", "web_search_20260318"):
        check_searched(await sim.client.messages.create(**ask(type=version)), 1)


async def test_no_search_under_tool_choice_none_or_zero_searches(sim: Running) -> None:
    for extra, text in (({"tool_choice": {"type": "none"}}, "hi"), ({}, "hi [sim:web_search=0]")):
        message = await sim.client.messages.create(**{**ask(text), **extra})
        assert [b.type for b in message.content] == ["text"]
        assert not getattr(message.content[0], "citations", None)


async def test_a_forced_search_is_a_search_not_a_client_tool_call(sim: Running) -> None:
    args = {**ask(), "tool_choice": {"type": "tool", "name": "web_search"}}
    message = await sim.client.messages.create(**args)
    check_searched(message, 1)
    assert not any(b.type == "tool_use" for b in message.content)


async def test_allowed_and_blocked_together_are_refused(sim: Running) -> None:
    with pytest.raises(anthropic.BadRequestError) as exc:
        await sim.client.messages.create(
            **ask(allowed_domains=["a.org"], blocked_domains=["b.org"])
        )
    assert "tools.0" in exc.value.message and "allowed_domains" in exc.value.message


async def test_vertex_answers_the_search_as_the_anthropic_face(vertex: Vertex) -> None:  # noqa: F811
    client = vertex.client()
    args = {**ask(), "model": VERTEX_MODEL, "extra_body": VERTEX_VERSION}
    body = await client.messages.create(**args)
    check_searched(body, 1)
    async with client.messages.stream(**args) as stream:
        streamed = await stream.get_final_message()
    check_searched(streamed, 1)


async def test_bedrock_refuses_the_search_tool(bedrock: Running) -> None:  # noqa: F811
    body = invoke_body("look it up", tools=[TOOL])
    with pytest.raises(ClientError) as exc:
        await invoke(bedrock.url, body)
    code, status, message = error_of(exc)
    assert (code, status) == ("ValidationException", 400)
    assert message.startswith(
        "tools.0: Input tag 'web_search_20250305' found using 'type' does not match any of the "
        "expected tags: 'bash_20250124', 'custom'"
    )


async def test_the_answer_sent_back_is_accepted_on_the_next_turn(sim: Running) -> None:
    """A client (Claude Code, a stateless loop) sends the search blocks back as history."""
    first = await sim.client.messages.create(**ask())
    history = [
        *ask()["messages"],
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
        {"role": "user", "content": "and the one before?"},
    ]
    second = await sim.client.messages.create(**{**ask(), "messages": history})
    assert searches(second)[0][0].input == {"query": "and the one before?"}
    # The pages read before count as input, as the API counts them.
    assert second.usage.input_tokens > first.usage.input_tokens + 100


async def test_an_anthropic_defined_client_tool_is_still_called(sim: Running) -> None:
    """Only the API's own tools are kept from tool_use: bash is the client's to run."""
    args = {**ask(), "tools": [TOOL, {"type": "bash_20250124", "name": "bash"}]}
    message = await sim.client.messages.create(**{**args, "tool_choice": {"type": "any"}})
    assert [b.name for b in message.content if b.type == "tool_use"] == ["bash"]
    assert message.stop_reason == "tool_use"
