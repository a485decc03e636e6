"""core.payload: model splice into request bodies, model rewrite of responses."""

from __future__ import annotations

import msgspec
import pytest
from ezat_common.config import DeploymentConfig
from ezat_router.core.payload import (
    PayloadError,
    model_prefix,
    read_response,
    upstream_model,
    with_model,
    with_response_model,
)


def dep(upstream: str | None) -> DeploymentConfig:
    return DeploymentConfig(
        name="d", model="anthropic/claude-x", base_url="http://x", upstream_model=upstream
    )


def test_upstream_model_defaults_to_the_id_after_the_last_slash() -> None:
    assert upstream_model(dep(None)) == "claude-x"
    assert upstream_model(dep("custom/name")) == "custom/name"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b"{}", {"model": "m"}),
        (b" { } \n", {"model": "m"}),
        (b'{"max_tokens":5}', {"model": "m", "max_tokens": 5}),
        (b'  {\n "a": [1, {"b": "}"}]}', {"model": "m", "a": [1, {"b": "}"}]}),
    ],
)
def test_with_model(body: bytes, expected: dict[str, object]) -> None:
    prefix = model_prefix(dep("m"))
    out = with_model(prefix, body)
    assert out.startswith(b'{"model":"m"')
    assert msgspec.json.decode(out) == expected


def test_model_name_is_json_escaped() -> None:
    out = with_model(model_prefix(dep('we"ird')), b"{}")
    assert msgspec.json.decode(out) == {"model": 'we"ird'}


@pytest.mark.parametrize("body", [b"", b"[]", b"null", b"   "])
def test_non_object_body_is_refused(body: bytes) -> None:
    with pytest.raises(PayloadError):
        with_model(b'{"model":"m"', body)


def test_response_with_model_rewrites_only_the_model() -> None:
    raw = msgspec.json.encode(
        {
            "id": "msg_1",
            "model": "upstream",
            "content": [{"type": "text", "text": "hi"}],
            "usage": {"input_tokens": 3, "output_tokens": 4},
        }
    )
    document, usage, content = read_response(raw)
    out = with_response_model(document, "claude-x")
    decoded = msgspec.json.decode(out)
    assert decoded["model"] == "claude-x"
    assert decoded["id"] == "msg_1" and decoded["content"] == content
    assert (usage.input_tokens, usage.output_tokens) == (3, 4)


@pytest.mark.parametrize("raw", [b"nope", b"[1]", b'{"usage": {"input_tokens": "x"}}'])
def test_response_that_is_not_a_message_is_refused(raw: bytes) -> None:
    with pytest.raises(PayloadError):
        read_response(raw)
