"""ezat_common.bodies: one set of refusals for a JSON request body, whichever API sends it."""

from __future__ import annotations

import msgspec
import pytest
from ezat_common.bodies import decode_body, decode_object
from ezat_common.errors import GatewayError


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"", "request body: is empty; send a JSON object"),
        (b"  \n", "request body: is empty; send a JSON object"),
        (b"[1]", "request body: must be a JSON object"),
        (b"[" * 100_000 + b"]" * 100_000, "request body: is nested too deeply"),
    ],
)
def test_decode_object_refusals(body: bytes, message: str) -> None:
    with pytest.raises(GatewayError) as info:
        decode_object(body)
    assert (info.value.status, info.value.message) == (400, message)


def test_invalid_json_says_what_the_decoder_saw() -> None:
    with pytest.raises(GatewayError) as info:
        decode_object(b"{")
    assert info.value.message.startswith("request body: is not valid JSON (")


def test_a_shape_error_is_left_to_the_caller() -> None:
    with pytest.raises(msgspec.ValidationError):
        decode_body(b'{"a": 1}', msgspec.json.Decoder(dict[str, str]).decode)


class _Known(msgspec.Struct):
    model: str = ""


@pytest.mark.parametrize(
    "body",
    [
        b'{"model": "\\ud800"}',
        b'{"model": "m", "x_unknown": {"a": ["\\udc00 z"]}}',  # a field nobody reads
        b'{"model": "m\\ud83d"}',  # a high surrogate with no low one after it
    ],
)
def test_a_lone_surrogate_escape_is_refused_wherever_it_is(body: bytes) -> None:
    # The edge lets a JSON \uXXXX escape through (valid UTF-8 text, docs/api.md, "Request
    # bytes"); the decoder every service uses refuses a lone surrogate, in any field.
    with pytest.raises(GatewayError) as info:
        decode_body(body, msgspec.json.Decoder(_Known).decode)
    assert info.value.message.startswith("request body: is not valid JSON (")


def test_an_escaped_surrogate_pair_is_one_character() -> None:
    assert decode_body(b'{"model": "\\ud83d\\ude00"}', msgspec.json.Decoder(_Known).decode) == (
        _Known(model="\U0001f600")
    )
