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
