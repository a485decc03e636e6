"""Responses API streams as the openai SDK reads them, for the translator's tests
(tests/translator/test_responses_output*.py; the Anthropic side: support.anthropic_streams).

- ``responses_events(out)``: the JSON events of a Responses SSE output, checking the framing
  (``event:`` names the data's ``type``) and that ``sequence_number`` counts from ``first``.
- ``accumulate(out)``: the output read by the SDK's own accumulator (``ResponseStreamState``, what
  ``client.responses.stream`` uses): every event validated against ``ResponseStreamEvent``; the
  final ``Response`` (of the completed, incomplete or failed event; None without one) and the
  state. ``plain(response)`` is a response as JSON values without the SDK's parsing additions.
- ``visible_seal``: a seal for tests whose output shows what it sealed (base64 JSON).
"""

from __future__ import annotations

import base64
import json
from typing import Any

import msgspec
import pydantic
from openai import omit
from openai.lib.streaming.responses._responses import ResponseStreamState
from openai.types.responses import Response, ResponseStreamEvent

_EVENT = pydantic.TypeAdapter(ResponseStreamEvent)


def responses_events(out: bytes, first: int = 0) -> list[dict[str, Any]]:
    assert out.endswith(b"\n\n") or not out
    events = []
    for frame in out.split(b"\n\n")[:-1]:
        head, _, data = frame.partition(b"\n")
        assert head.startswith(b"event: "), frame
        assert data.startswith(b"data: "), frame
        event = msgspec.json.decode(data[6:])
        assert event["type"] == head[7:].decode()
        events.append(event)
    assert [e["sequence_number"] for e in events] == list(range(first, first + len(events)))
    return events


def accumulate(out: bytes) -> tuple[Response | None, ResponseStreamState[None]]:
    state: ResponseStreamState[None] = ResponseStreamState(input_tools=omit, text_format=omit)
    final: Response | None = None
    for raw in responses_events(out):
        for event in state.handle_event(_EVENT.validate_python(raw)):
            if event.type in ("response.completed", "response.incomplete", "response.failed"):
                final = event.response
    return final, state


def plain(response: Response) -> dict[str, Any]:
    """A response as JSON values, without the SDK's parsing additions (``parsed``,
    ``parsed_arguments``), to compare a streamed answer with the non-streamed one."""
    value = response.model_dump(mode="json")
    for item in value["output"]:
        item.pop("parsed_arguments", None)
        for part in item.get("content") or []:
            part.pop("parsed", None)
    return value


def visible_seal(blocks: list[dict[str, Any]]) -> str:
    return "sealed:" + base64.b64encode(json.dumps(blocks).encode()).decode()
