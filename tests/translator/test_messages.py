"""The Messages translation core: the four checked fields, model rewrite, cache_control removal."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from ezat_common.errors import GatewayError
from ezat_translator.core.messages import prepare_count, prepare_create
from support.config import catalogue, model

SMALL = {"context_window": 1000, "max_output_tokens": 100, "price": {"input": 1.0, "output": 2.0}}

CAT = catalogue(
    model("anthropic/cached", aliases=["cached"], **SMALL),
    model("anthropic/plain", prompt_caching=False, **SMALL),
)

MSGS = [{"role": "user", "content": "hi"}]


def enc(obj: Any) -> bytes:
    return msgspec.json.encode(obj)


def test_model_and_stream_are_removed_and_rest_passes_unchanged() -> None:
    # The router writes both where the deployment's kind wants them (docs/routing.md).
    body = {
        "model": " Cached ",
        "max_tokens": 10,
        "messages": MSGS,
        "stream": True,
        "metadata": {"user_id": "u"},
        "system": [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}],
        "anything_new": [1, 2, 3],
    }
    out = prepare_create(enc(body), CAT)
    assert out.model.id == "anthropic/cached"
    assert out.response_model == " Cached "
    assert out.stream is True
    sent = msgspec.json.decode(out.body)
    expected = dict(body)
    del expected["model"], expected["stream"]
    assert sent == expected


def test_cache_control_stripped_everywhere_for_models_without_caching() -> None:
    body = {
        "model": "anthropic/plain",
        "max_tokens": 10,
        "cache_control": {"type": "ephemeral"},
        "system": [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}],
        "tools": [{"name": "t", "input_schema": {}, "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {
                "role": "user",
                "content": [
                    {
                        "type": "text",
                        "text": "a",
                        "cache_control": {"type": "ephemeral", "ttl": "1h"},
                    },
                    {
                        "type": "tool_result",
                        "tool_use_id": "x",
                        "content": [
                            {"type": "text", "text": "r", "cache_control": {"type": "ephemeral"}}
                        ],
                    },
                ],
            }
        ],
    }
    sent = msgspec.json.decode(prepare_create(enc(body), CAT).body)
    assert "cache_control" not in repr(sent)
    assert sent["messages"][0]["content"][1]["content"][0]["text"] == "r"


META: dict[str, Any] = {"model": "cached", "max_tokens": 1, "messages": MSGS}


@pytest.mark.parametrize(
    ("body", "status", "prefix"),
    [
        (b"", 400, "request body:"),
        (b"{", 400, "request body:"),
        (b"42", 400, "request body:"),
        (enc({"max_tokens": 1, "messages": MSGS}), 400, "model: Field required"),
        (enc({"model": None, "max_tokens": 1, "messages": MSGS}), 400, "model:"),
        (enc({"model": "nope", "max_tokens": 1, "messages": MSGS}), 404, "The model `nope`"),
        (enc({"model": "cached", "messages": MSGS}), 400, "max_tokens: Field required"),
        (enc({"model": "cached", "max_tokens": True, "messages": MSGS}), 400, "max_tokens:"),
        (enc({"model": "cached", "max_tokens": 1.5, "messages": MSGS}), 400, "max_tokens:"),
        (enc({"model": "cached", "max_tokens": -1, "messages": MSGS}), 400, "max_tokens:"),
        (enc({"model": "cached", "max_tokens": 1}), 400, "messages: Field required"),
        (enc({"model": "cached", "max_tokens": 1, "messages": []}), 400, "messages:"),
        (enc({"model": "cached", "max_tokens": 1, "messages": "hi"}), 400, "messages:"),
        (enc({"model": "cached", "max_tokens": 1, "messages": MSGS, "stream": 1}), 400, "stream:"),
        (enc(META | {"metadata": []}), 400, "metadata: must be an object"),
        (enc(META | {"metadata": {"x": 1}}), 400, "metadata.x: Extra inputs are not permitted"),
        (enc(META | {"metadata": {"user_id": 1}}), 400, "metadata.user_id: must be a string"),
        (enc(META | {"metadata": {"user_id": "u" * 257}}), 400, "metadata.user_id: is longer"),
    ],
)
def test_refusals_name_the_field(body: bytes, status: int, prefix: str) -> None:
    with pytest.raises(GatewayError) as info:
        prepare_create(body, CAT)
    assert info.value.status == status
    assert info.value.message.startswith(prefix), info.value.message


@pytest.mark.parametrize("metadata", [None, {}, {"user_id": None}, {"user_id": "u" * 256}])
def test_metadata_within_the_anthropic_apis_rule_passes_unchanged(metadata: Any) -> None:
    sent = msgspec.json.decode(prepare_create(enc(META | {"metadata": metadata}), CAT).body)
    assert sent["metadata"] == metadata


def test_unknown_model_error_carries_code() -> None:
    with pytest.raises(GatewayError) as info:
        prepare_create(enc({"model": "gpt-9", "max_tokens": 1, "messages": MSGS}), CAT)
    assert info.value.code == "model_not_found"
    assert info.value.type == "not_found_error"
    assert info.value.message.endswith("GET /v1/models lists the models you can use.")


def test_count_tokens_ignores_max_tokens_and_stream() -> None:
    body = {"model": "cached", "max_tokens": "junk", "stream": "junk", "messages": MSGS}
    out = prepare_count(enc(body), CAT)
    assert msgspec.json.decode(out.body) == {"messages": MSGS}
    assert out.stream is False


def test_stream_null_means_false() -> None:
    out = prepare_create(
        enc({"model": "cached", "max_tokens": 1, "messages": MSGS, "stream": None}), CAT
    )
    assert out.stream is False


def test_prefix_hash_depends_on_model_system_and_tools_only() -> None:
    base = {"model": "cached", "max_tokens": 1, "messages": MSGS, "system": "s", "tools": []}
    a = prepare_create(enc(base), CAT).prefix_hash
    b = prepare_create(enc({**base, "messages": [*MSGS, *MSGS], "max_tokens": 9}), CAT)
    assert a is not None and a == b.prefix_hash
    assert prepare_create(enc({**base, "system": "other"}), CAT).prefix_hash != a
    assert prepare_create(enc({**base, "tools": [{"name": "t"}]}), CAT).prefix_hash != a


@pytest.mark.parametrize(
    ("system", "ttl"),
    [
        ("plain", None),
        ([{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}], "5m"),
        (
            [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
            "1h",
        ),
    ],
)
def test_cache_ttl_is_the_largest_breakpoint(system: Any, ttl: str | None) -> None:
    body = {"model": "cached", "max_tokens": 1, "messages": MSGS, "system": system}
    assert prepare_create(enc(body), CAT).cache_ttl == ttl


# ---- bodies nested too deeply (C8) ------------------------------------------------------------


@pytest.mark.parametrize("translate", [prepare_create, prepare_count])
def test_deeply_nested_body_is_a_400_not_a_recursion_error(translate: Any) -> None:
    depth = 100_000
    body = b'{"model":"cached","max_tokens":5,"messages":' + b"[" * depth + b"]" * depth + b"}"
    with pytest.raises(GatewayError) as info:
        translate(body, CAT)
    assert info.value.status == 400
    assert info.value.message == "request body: is nested too deeply"


def test_deeply_nested_chat_body_is_a_400() -> None:
    from ezat_translator.core.openai_to_anthropic import decode_chat_request

    depth = 100_000
    body = b'{"model":"cached","messages":[],"metadata":' + b"[" * depth + b"]" * depth + b"}"
    with pytest.raises(GatewayError) as info:
        decode_chat_request(body)
    assert (info.value.status, info.value.message) == (400, "request body: is nested too deeply")


def test_strip_cache_control_is_iterative() -> None:
    from ezat_translator.core.messages import largest_cache_ttl, strip_cache_control

    node: Any = {"cache_control": {"type": "ephemeral"}}
    root = node
    for _ in range(50_000):  # far deeper than the interpreter's recursion limit
        node["next"] = [{"cache_control": {"type": "ephemeral", "ttl": "5m"}}]
        node = node["next"][0]
    assert largest_cache_ttl(root) == "5m"
    strip_cache_control(root)
    assert largest_cache_ttl(root) is None


# ---- image blocks with a URL source (docs/api.md, "Messages API") --------------------------


def test_url_images_are_found_with_their_paths() -> None:
    url = {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}
    inline = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": ""}}
    body = {
        "model": "cached",
        "max_tokens": 5,
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "x"}, url, inline]},
            {"role": "assistant", "content": "plain"},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t", "content": [inline, url]},
                    {"type": "image", "source": {"type": "url", "url": 7}},  # deployment says
                ],
            },
        ],
    }
    out = prepare_create(msgspec.json.encode(body), CAT)
    assert out.body == b""
    assert out.data is not None and "model" not in out.data
    assert [(p.path, p.message_index, p.block_index, p.inner_index) for p in out.image_urls] == [
        ("messages[0].content[1].source.url", 0, 1, None),
        ("messages[2].content[0].content[1].source.url", 2, 0, 1),
    ]
    assert all(p.url == "https://example.com/a.png" for p in out.image_urls)


def test_without_url_images_the_body_is_encoded() -> None:
    body = {"model": "cached", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}
    out = prepare_create(msgspec.json.encode(body), CAT)
    assert out.data is None and out.image_urls == []
    assert msgspec.json.decode(out.body) == {"max_tokens": 5, "messages": body["messages"]}


@pytest.mark.parametrize(
    ("metadata", "user"),
    [(None, None), ({}, None), ({"user_id": None}, None), ({"user_id": ""}, None),
     ({"user_id": "end-user-42"}, "end-user-42"),
     # Claude Code's envelope is no user name: its account, else the key's user (None here).
     ({"user_id": '{"device_id":"d1","account_uuid":"","session_id":"s1"}'}, None),
     ({"user_id": '{"device_id":"d1","account_uuid":"acct-7","session_id":"s1"}'}, "acct-7"),
     ({"user_id": '{"not": "claude code"}'}, '{"not": "claude code"}'),
     ({"user_id": "{not json"}, "{not json")],
)  # fmt: skip
def test_metadata_user_id_is_kept_for_attribution(metadata: Any, user: str | None) -> None:
    body = META if metadata is None else META | {"metadata": metadata}
    assert prepare_create(enc(body), CAT).user_id == user
