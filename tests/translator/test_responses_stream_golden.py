"""core.responses_stream: whole Anthropic event streams and the Responses events they become.

Golden transcripts under golden/responses_stream/<case>/: in.sse (what the deployment sent, as it
sent it: pings, unknown events, errors and cuts included), options.json (optional: the request's
``custom_tools`` and ``namespaced`` tools) and out.sse (exactly what the client must read:
``feed``, then ``final`` as the caller writes it once the usage record is durable, then
``finish`` at the end of input). The golden answers of golden/responses_output/ are streamed too
(test_responses_output_stream.py); these are the sequences a body cannot show. Every out.sse
must be read by the openai SDK's own accumulator (``ResponseStreamState``), every event
validated against ``ResponseStreamEvent``. UPDATE_GOLDEN=1 rewrites out.sse; review each against
docs/responses.md ("Response object and stream").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pydantic
import pytest
from ezat_translator.core.responses_stream import ResponsesStream
from openai.types.responses import ResponseOutputItem
from support.golden import assert_golden
from support.responses_sse import accumulate, plain, responses_events, visible_seal

from .responses_output_support import case_meta

GOLDEN = Path(__file__).parent / "golden" / "responses_stream"
CASES = sorted(p for p in GOLDEN.iterdir() if p.is_dir())
_ITEM = pydantic.TypeAdapter(ResponseOutputItem)
FINAL_TYPES = ("response.completed", "response.incomplete", "response.failed")


def streamed(case: Path, frames: list[bytes]) -> bytes:
    stream = ResponsesStream(case_meta(case), visible_seal)
    out = b"".join(stream.feed(frame) for frame in frames)
    return out + stream.final() + stream.finish()


def as_sdk_reads(items: list[dict[str, Any]]) -> list[Any]:
    """Output items as the SDK's types hold them (its defaults filled in), to compare with what
    its accumulator built."""
    return [_ITEM.validate_python(item) for item in items]


def frames_of(sse: bytes) -> list[bytes]:
    return [part + b"\n\n" for part in sse.split(b"\n\n") if part]


def test_the_cases_are_there() -> None:
    names = {p.name for p in CASES}
    assert names >= {"text_only", "text_then_tool_use", "thinking_then_text", "mid_stream_error"}
    assert names >= {"max_tokens", "multiple_text_and_tool_items", "cut_before_message_stop"}


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_stream_matches_golden(case: Path) -> None:
    out = streamed(case, [(case / "in.sse").read_bytes()])
    assert_golden(case / "out.sse", out.decode())


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_frame_by_frame_gives_the_same_bytes(case: Path) -> None:
    sse = (case / "in.sse").read_bytes()
    assert streamed(case, frames_of(sse)) == streamed(case, [sse])


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_the_sdk_accumulates_the_golden(case: Path) -> None:
    out = (case / "out.sse").read_bytes()
    events = responses_events(out)
    final, state = accumulate(out)
    assert final is not None
    # One final event, the last; the response it carries holds every item that was done.
    types = [e["type"] for e in events]
    assert [t for t in types if t in FINAL_TYPES] == [types[-1]]
    assert types[:2] == ["response.created", "response.in_progress"]
    done = as_sdk_reads([e["item"] for e in events if e["type"] == "response.output_item.done"])
    assert plain(final)["output"] == [item.model_dump(mode="json") for item in done]
    assert final.id == "resp_req_0123456789"
    if final.status == "failed":
        assert final.usage is None and final.error is not None
    else:
        assert final.usage is not None
        # What the deltas built up is what the items say when done (the accumulator's snapshot
        # keeps each item as added, its status included: only its text grows).
        snapshot = state._ResponseStreamState__current_snapshot  # type: ignore[attr-defined]
        assert [built(i) for i in snapshot.output] == [built(i) for i in done]


def built(item: Any) -> tuple[str, str | None]:
    """What the accumulator builds from deltas: a message's text, a function call's arguments
    (it does not build a custom tool call's input from its deltas)."""
    if item.type == "message":
        return item.type, "".join(part.text for part in item.content)
    if item.type == "function_call":
        return item.type, item.arguments
    return item.type, None
