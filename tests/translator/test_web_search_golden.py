"""Golden files of web search in both OpenAI APIs (docs/responses.md and docs/api.md, "Web search").

- golden/web_search_request/<case>/: ``in.json`` a Responses (``responses_*``) or Chat
  (``chat_*``) request, ``out.json`` the Anthropic body sent upstream (without ``model``).
- golden/web_search_output/<case>/: ``in.json`` the deployment's answer, with its searches and
  citations; ``responses.json`` and ``responses.sse`` the Responses answer (JSON, streamed),
  ``chat.json`` and ``chat.sse`` the Chat answer. The stream is ``in.json`` as a deployment streams
  it (``support.anthropic_streams.anthropic_stream``: citations before the cited text). Every
  file is also read back by the openai SDK: its types, its Responses accumulator, its Chat stream
  helper. ``UPDATE_GOLDEN=1`` rewrites the expected files; review the diff.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from ezat_translator.core.anthropic_to_openai import to_chat_completion
from ezat_translator.core.anthropic_to_responses import ResponseMeta, to_response
from ezat_translator.core.chat_stream import ChatStream
from ezat_translator.core.responses_stream import ResponsesStream
from openai.lib.streaming.chat._completions import ChatCompletionStreamState
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import Response
from support.anthropic_streams import anthropic_stream
from support.golden import assert_golden, assert_golden_json
from support.responses_sse import accumulate, plain, responses_events, visible_seal

from . import openai_to_anthropic_support as chat
from . import responses_request_support as responses

HERE = Path(__file__).parent / "golden"
REQUESTS = sorted(p for p in (HERE / "web_search_request").iterdir() if p.is_dir())
ANSWERS = sorted(p for p in (HERE / "web_search_output").iterdir() if p.is_dir())
META = ResponseMeta(
    request_id="req_0123456789", response_model="anthropic/claude-sonnet-5-5", created_at=1793318400
)


def pretty(value: Any) -> str:
    return msgspec.json.format(msgspec.json.encode(value), indent=2).decode() + "\n"


def test_the_cases_are_there() -> None:
    assert {p.name for p in ANSWERS} >= {"search_and_cited_answer", "search_error"}
    assert len(REQUESTS) >= 6


@pytest.mark.parametrize("case", REQUESTS, ids=lambda p: p.name)
def test_request_matches_golden(case: Path) -> None:
    body = json.loads((case / "in.json").read_text())
    api = responses if case.name.startswith("responses_") else chat
    translation = api.translate(body)
    assert_golden_json(
        case / "out.json", msgspec.json.decode(msgspec.json.encode(translation.body))
    )


def _responses_stream(body: dict[str, Any]) -> bytes:
    stream = ResponsesStream(META, visible_seal)
    out = stream.feed(anthropic_stream(body))
    return out + stream.final() + stream.finish()


def _chat_stream(body: dict[str, Any]) -> bytes:
    stream = ChatStream(
        request_id="0123456789",
        response_model="anthropic/claude-sonnet-5-5",
        created=1,
        include_usage=True,
    )
    return stream.feed(anthropic_stream(body)) + stream.finish()


@pytest.mark.parametrize("case", ANSWERS, ids=lambda p: p.name)
def test_responses_answer_matches_golden(case: Path) -> None:
    body = json.loads((case / "in.json").read_text())
    out = to_response(msgspec.json.encode(body), META, visible_seal)
    assert_golden(case / "responses.json", pretty(msgspec.json.decode(out)))
    streamed = _responses_stream(body)
    assert_golden(case / "responses.sse", streamed.decode())
    # The SDK reads both, and its accumulator makes the streamed one the JSON one.
    expected = Response.model_validate_json(out)
    final, _ = accumulate(streamed)
    assert final is not None and plain(final) == plain(expected)


@pytest.mark.parametrize("case", ANSWERS, ids=lambda p: p.name)
def test_chat_answer_matches_golden(case: Path) -> None:
    body = json.loads((case / "in.json").read_text())
    out, _ = to_chat_completion(
        msgspec.json.encode(body),
        request_id="0123456789",
        response_model="anthropic/claude-sonnet-5-5",
        created=1,
    )
    assert_golden(case / "chat.json", pretty(msgspec.json.decode(out)))
    streamed = _chat_stream(body)
    assert_golden(case / "chat.sse", streamed.decode())
    (whole,) = ChatCompletion.model_validate_json(out).choices
    state: ChatCompletionStreamState[None] = ChatCompletionStreamState()
    for line in streamed.split(b"\n\n")[:-2]:
        list(state.handle_chunk(ChatCompletionChunk.model_validate_json(line[6:])))
    (choice,) = state.current_completion_snapshot.choices
    assert choice.message.content == whole.message.content
    assert choice.message.annotations == whole.message.annotations


def test_a_search_streams_its_events_in_order_when_its_result_arrives() -> None:
    body = json.loads(
        (HERE / "web_search_output" / "search_and_cited_answer" / "in.json").read_text()
    )
    events = responses_events(_responses_stream(body))
    search = [e for e in events if "web_search_call" in json.dumps(e.get("item", e.get("type")))]
    assert [e["type"] for e in search] == [
        "response.output_item.added",
        "response.web_search_call.in_progress",
        "response.web_search_call.searching",
        "response.web_search_call.completed",
        "response.output_item.done",
    ]
    assert search[0]["item"]["status"] == "in_progress"
    assert search[-1]["item"]["status"] == "completed"
    assert {e.get("item_id", e.get("item", {}).get("id")) for e in search} == {
        search[0]["item"]["id"]
    }
    # The answer's three text blocks (plain, cited, plain) are one message, as OpenAI answers:
    # the citations index into its one part's text.
    notes = [e for e in events if e["type"] == "response.output_text.annotation.added"]
    assert [(e["output_index"], e["content_index"], e["annotation_index"]) for e in notes] == [
        (2, 0, 0),
        (2, 0, 1),
    ]
    (text,) = [e["text"] for e in events if e["type"] == "response.output_text.done"][-1:]
    assert text.startswith("Python 3.14 was released") and text.endswith("new too.")
    cited = "Free-threaded Python is now officially supported."
    assert {text[e["annotation"]["start_index"] : e["annotation"]["end_index"]] for e in notes} == {
        cited
    }
    messages = [e for e in events if e["type"] == "response.output_item.added"]
    assert [e["item"]["type"] for e in messages].count("message") == 2  # before and after


def test_the_chat_annotations_index_into_the_joined_content() -> None:
    body = json.loads(
        (HERE / "web_search_output" / "search_and_cited_answer" / "in.json").read_text()
    )
    out, _ = to_chat_completion(
        msgspec.json.encode(body), request_id="r", response_model="m", created=1
    )
    (choice,) = ChatCompletion.model_validate_json(out).choices
    content = choice.message.content or ""
    cited = "Free-threaded Python is now officially supported."
    spans = {
        content[a.url_citation.start_index : a.url_citation.end_index]
        for a in choice.message.annotations or []
    }
    assert spans == {cited}
    assert [a.url_citation.url for a in choice.message.annotations or []] == [
        "https://docs.python.org/3.14/whatsnew/3.14.html",
        "https://www.python.org/downloads/release/python-3140/",
    ]


def test_usage_says_nothing_of_searches_it_does_not_know() -> None:
    """The OpenAI usage objects have no field for searches: none is invented (the search fee is
    in cost_usd, priced by the router)."""
    body = json.loads(
        (HERE / "web_search_output" / "search_and_cited_answer" / "in.json").read_text()
    )
    response = msgspec.json.decode(
        to_response(msgspec.json.encode(body), META, None, cost_usd=0.0163)
    )
    assert "search" not in json.dumps(response["usage"])
    assert response["usage"]["cost_usd"] == 0.0163
    out, _ = to_chat_completion(
        msgspec.json.encode(body), request_id="r", response_model="m", created=1, cost_usd=0.0163
    )
    usage = msgspec.json.decode(out)["usage"]
    assert "search" not in json.dumps(usage) and usage["cost_usd"] == 0.0163


@pytest.mark.parametrize("streamed", [False, True], ids=["json", "stream"])
def test_a_search_id_is_sealed_when_thinking_is_not(streamed: bool) -> None:
    """store false without include: no thinking is sealed, but the search's id is, so that a
    stateless client sending it back gives the next turn its results (issue 31: its id was the
    plain fallback, and the results were lost)."""
    body = json.loads(
        (HERE / "web_search_output" / "search_and_cited_answer" / "in.json").read_text()
    )
    body["content"].insert(0, {"type": "thinking", "thinking": "Look it up.", "signature": "s"})
    if streamed:
        stream = ResponsesStream(META, None, visible_seal)
        stream.feed(anthropic_stream(body))
        stream.final()
        assert stream.response is not None
        output = msgspec.json.decode(msgspec.json.encode(stream.response))["output"]
    else:
        raw = to_response(json.dumps(body).encode(), META, None, None, visible_seal)
        output = json.loads(raw)["output"]
    (thinking,) = [item for item in output if item["type"] == "reasoning"]
    assert "encrypted_content" not in thinking
    (search,) = [item for item in output if item["type"] == "web_search_call"]
    assert search["id"].startswith("ws_sealed:")
