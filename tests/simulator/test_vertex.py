"""The Vertex face's pure parts (vertex.py): the route's action, the body rules, Google's errors."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from ezat_simulator.vertex import (
    VERTEX_VERSION,
    VertexRefusal,
    google_body,
    split_action,
    to_messages_body,
)

VERSIONS = frozenset({VERTEX_VERSION})
BODY = {"anthropic_version": VERTEX_VERSION, "max_tokens": 5, "messages": []}
M = "claude-opus-4-5@20251101"


def test_the_action_is_after_the_last_colon() -> None:
    assert split_action(f"{M}:rawPredict") == (M, "rawPredict")
    assert split_action(f"{M}:streamRawPredict") == (M, "streamRawPredict")
    assert split_action("count-tokens:rawPredict") == ("count-tokens", "rawPredict")


@pytest.mark.parametrize("tail", [M, f"{M}:predict", ":rawPredict", f"{M}:"])
def test_other_actions_are_not_found(tail: str) -> None:
    with pytest.raises(VertexRefusal) as err:
        split_action(tail)
    assert err.value.status == 404


def test_the_url_names_the_model_and_the_version_is_dropped() -> None:
    assert to_messages_body(BODY, M, "rawPredict", VERSIONS) == {
        "max_tokens": 5,
        "messages": [],
        "model": M,
    }
    streamed = to_messages_body({**BODY, "stream": True}, M, "streamRawPredict", VERSIONS)
    assert streamed["stream"] is True and streamed["model"] == M
    counted = to_messages_body({**BODY, "model": M}, "count-tokens", "rawPredict", VERSIONS)
    assert counted == {"max_tokens": 5, "messages": [], "model": M}


REFUSED: list[tuple[Any, str, str, str]] = [
    ([], M, "rawPredict", "Invalid JSON payload received. Expected an object."),
    ({**BODY, "anthropic_version": None}, M, "rawPredict", "anthropic_version: Field required"),
    ({**BODY, "anthropic_version": "2023-06-01"}, M, "rawPredict", "anthropic_version: Input"),
    ({**BODY, "model": M}, M, "rawPredict", "model: the model is named by the URL"),
    (BODY, M, "streamRawPredict", 'streamRawPredict expects "stream": true'),
    ({**BODY, "stream": True}, M, "rawPredict", "rawPredict does not stream"),
    (BODY, "count-tokens", "rawPredict", "model: Field required"),
]


@pytest.mark.parametrize(
    ("body", "model", "action", "message"), REFUSED, ids=[r[3] for r in REFUSED]
)
def test_refused(body: Any, model: str, action: str, message: str) -> None:
    if isinstance(body, dict):
        body = {k: v for k, v in body.items() if v is not None}
    with pytest.raises(VertexRefusal) as err:
        to_messages_body(body, model, action, VERSIONS)
    assert err.value.status == 400 and err.value.message.startswith(message)


def test_googles_error_shape() -> None:
    assert msgspec.json.decode(google_body(429, "slow down")) == {
        "error": {"code": 429, "message": "slow down", "status": "RESOURCE_EXHAUSTED"}
    }
    assert msgspec.json.decode(google_body(418, "?"))["error"]["status"] == "UNKNOWN"
