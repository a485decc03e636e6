"""A request's identity is resolved when its envelope is decoded: an older producer's message
without a uid gets the request id as its uid (docs/billing.md, "Identity: uid, not the request
id"), so no reader has to fall back itself."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
import pytest
from ezat_common import envelopes, fetch_envelopes, usage_envelopes
from ezat_common.envelope_parts import Identified

_USAGE = {"key_id": "k", "model": "m", "api": "messages", "stream": False, "status": "complete"}
_ROUTE = {"api": "messages", "key_id": "k", "model": "m", "response_model": "m", "stream": False}
_HOP = {"reply_to": "r", "received_at": 1.0}

# Every envelope that carries a request's uid: its tag, a decoder, its other required fields.
CASES: list[tuple[str, Callable[[bytes], Any], dict[str, object]]] = [
    ("client_request", envelopes.decode_client_request, {"api": "messages", "key_id": "k", **_HOP}),
    ("route_request", envelopes.decode_route_request, {**_ROUTE, **_HOP}),
    ("cancel", envelopes.decode_cancel, {}),
    ("usage", envelopes.decode_usage_record, _USAGE),
    ("usage", envelopes.decode_outbox, _USAGE),
    ("fetch_request", envelopes.decode_fetch_request, {"url": "https://x", "part": "p"}),
]


# What the producer sent as uid (None: no uid key, as older producers) -> the uid decoded.
UIDS = [(None, "req-1"), ("", "req-1"), ("uid-1", "uid-1")]


@pytest.mark.parametrize(("sent", "resolved"), UIDS)
@pytest.mark.parametrize(
    ("tag", "decode", "fields"), CASES, ids=lambda c: getattr(c, "__name__", c)
)
def test_the_uid_falls_back_to_the_request_id(
    tag: str,
    decode: Callable[[bytes], Any],
    fields: dict[str, object],
    sent: str | None,
    resolved: str,
) -> None:
    # Built as a plain map, as another producer's encoder sends it.
    message = {"t": tag, "request_id": "req-1", **fields}
    if sent is not None:
        message["uid"] = sent
    assert decode(msgspec.msgpack.encode(message)).uid == resolved


def test_every_envelope_with_a_uid_is_covered() -> None:
    # A new envelope carrying a uid must resolve it too: it joins CASES.
    with_uid = [
        cls
        for module in (envelopes, usage_envelopes, fetch_envelopes)
        for cls in vars(module).values()
        if isinstance(cls, type)
        and issubclass(cls, msgspec.Struct)
        and "uid" in cls.__struct_fields__
    ]
    assert {cls.__struct_config__.tag for cls in with_uid} == {tag for tag, _, _ in CASES}
    assert all(issubclass(cls, Identified) for cls in with_uid)


def test_a_message_made_here_resolves_it_too() -> None:
    assert envelopes.CancelRequest(request_id="req-1").uid == "req-1"
