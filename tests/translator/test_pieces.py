"""A large body decoded in pieces (core/pieces.py) gives what the one-piece decode gives: the
same request, or the same 400 naming the same field (docs/reliability.md, "Large bodies")."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from ezat_common.bodies import decode_object
from ezat_common.errors import GatewayError
from ezat_translator.core import pieces
from ezat_translator.core.openai_to_anthropic import decode_chat_request
from ezat_translator.core.responses_to_anthropic import decode_responses_request


def outcome(decode: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return "ok", decode()
    except GatewayError as exc:
        return "error", (exc.status, str(exc))


RESPONSES = [
    b'{"model":"m","input":[{"type":"message","role":"user","content":"hi"},{"x":[1,{}]}]}',
    b'{"model":"m","input":[{"type":"message"},3]}',
    b'{"model":"m","input":"one string"}',
    b'{"model":"m","input":null,"store":false}',
    b"[1]",
    b"",
    b'{"model":3,"input":[{}]}',
    b'{"input":[{}]}',
    b'{"model":"m","input":[{"a":1}],"store":3}',
    b'{"model":"m","input":[{"a":1},]}',
]
CHAT = [
    b'{"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant","content":"y"}]}',
    b'{"model":"m","messages":[{"role":"user","content":"x"},{"role":"bad"}]}',
    b'{"model":"m","messages":[{"role":"user","content":3}]}',
    b'{"model":"m","messages":[{"role":"user","content":[{"type":"text"}]}]}',
    b'{"model":"m","messages":[]}',
    b'{"model":"m"}',
    b'{"model":"m","messages":"no"}',
    b'{"model":"m","messages":[{"role":"user","content":"x"}],"stream":"no"}',
]
MESSAGES = [
    b'{"model":"m","messages":[1,{"a":[2]}],"system":{"y":1},"max_tokens":5}',
    b'{"messages":3}',
    b"[]",
    b'{"model":"m","messages":[{"a":1},]}',
]


@pytest.mark.parametrize("body", RESPONSES)
def test_a_responses_body_decodes_the_same_in_pieces(body: bytes) -> None:
    whole = outcome(lambda: decode_responses_request(body))
    assert outcome(lambda: decode_responses_request(body, in_pieces=True)) == whole


@pytest.mark.parametrize("body", CHAT)
def test_a_chat_body_decodes_the_same_in_pieces(body: bytes) -> None:
    whole = outcome(lambda: decode_chat_request(body))
    assert outcome(lambda: decode_chat_request(body, in_pieces=True)) == whole


@pytest.mark.parametrize("body", MESSAGES)
def test_a_messages_body_decodes_the_same_in_pieces(body: bytes) -> None:
    whole = outcome(lambda: decode_object(body))
    in_pieces = outcome(lambda: pieces.decode_object(body, "messages"))
    assert in_pieces == whole
    if whole[0] == "ok":  # the deployment gets the members in the client's order
        assert list(in_pieces[1]) == list(whole[1])


def test_an_item_nested_too_deeply_is_a_400() -> None:
    body = b'{"model":"m","input":[' + b"[" * 5000 + b"]" * 5000 + b"]}"
    with pytest.raises(GatewayError) as caught:
        decode_responses_request(body, in_pieces=True)
    assert caught.value.status == 400
