"""errors: a GatewayError carries its ReplyError, and each API's renderer shows one exactly as
clients have always seen it (status, body, headers, the stream's error event)."""

from __future__ import annotations

import pytest
from ezat_common import envelopes
from ezat_common.envelopes import UNRECORDED, Api, ReplyError
from ezat_common.errors import (
    ANTHROPIC,
    OPENAI,
    RENDERERS,
    GatewayError,
    invalid,
    model_not_found,
)

RID = "req_1"

# status -> (Anthropic type, OpenAI status, OpenAI type, OpenAI code); the message is "m".
STATUSES: dict[int, tuple[str, int, str, str | None]] = {
    400: ("invalid_request_error", 400, "invalid_request_error", None),
    401: ("authentication_error", 401, "authentication_error", "invalid_api_key"),
    402: ("billing_error", 402, "invalid_request_error", None),
    403: ("permission_error", 403, "permission_error", None),
    404: ("not_found_error", 404, "invalid_request_error", None),
    408: ("invalid_request_error", 408, "invalid_request_error", None),
    409: ("invalid_request_error", 409, "invalid_request_error", None),
    413: ("request_too_large", 413, "invalid_request_error", "request_too_large"),
    422: ("invalid_request_error", 422, "invalid_request_error", None),
    429: ("rate_limit_error", 429, "rate_limit_error", "rate_limit_exceeded"),
    500: ("api_error", 500, "server_error", "internal_error"),
    502: ("api_error", 502, "server_error", None),
    503: ("overloaded_error", 503, "server_error", "overloaded"),
    504: ("timeout_error", 504, "server_error", "timeout"),
    529: ("overloaded_error", 503, "server_error", "overloaded"),
}


def anthropic_json(type: str, message: str = "m") -> bytes:
    return b'{"type":"error","error":{"type":"%s","message":"%s"},"request_id":"req_1"}' % (
        type.encode(),
        message.encode(),
    )


def openai_json(type: str, code: str | None, param: str | None = None) -> bytes:
    def text(value: str | None) -> bytes:
        return b"null" if value is None else b'"%s"' % value.encode()

    return b'{"error":{"message":"m","type":"%s","param":%s,"code":%s}}' % (
        type.encode(),
        text(param),
        text(code),
    )


@pytest.mark.parametrize("status", sorted(STATUSES))
def test_anthropic_renders_every_status(status: int) -> None:
    kind = STATUSES[status][0]
    reply = GatewayError(status, "m").reply
    assert reply.type == kind
    assert ANTHROPIC.response(reply, RID) == (status, {}, anthropic_json(kind))
    assert ANTHROPIC.event(reply, RID) == b"event: error\ndata: " + anthropic_json(kind) + b"\n\n"


@pytest.mark.parametrize("status", sorted(STATUSES))
def test_openai_renders_every_status(status: int) -> None:
    _, shown, kind, code = STATUSES[status]
    reply = GatewayError(status, "m").reply
    assert OPENAI.response(reply, RID) == (shown, {}, openai_json(kind, code))
    assert OPENAI.event(reply, RID) == (
        b"data: " + openai_json(kind, code) + b"\n\ndata: [DONE]\n\n"
    )


def test_openai_body_names_param_and_code_but_its_stream_event_does_not() -> None:
    reply = model_not_found("m", "chat").reply
    message = (
        b"The model `m` does not exist or you do not have access to it. "
        b"GET /openai/v1/models lists the models you can use."
    )
    assert OPENAI.body(reply, RID) == (
        b'{"error":{"message":"' + message + b'",'
        b'"type":"invalid_request_error","param":"model","code":"model_not_found"}}'
    )
    assert OPENAI.event(reply, RID) == (
        b'data: {"error":{"message":"' + message + b'",'
        b'"type":"invalid_request_error","param":null,"code":null}}\n\ndata: [DONE]\n\n'
    )


@pytest.mark.parametrize(
    ("api", "listed", "other"),
    [
        ("messages", "GET /v1/models", "/openai/"),
        ("count_tokens", "GET /v1/models", "/openai/"),
        ("chat", "GET /openai/v1/models", "GET /v1/models"),
        ("responses", "GET /openai/v1/models", "GET /v1/models"),
    ],
)
def test_the_unknown_model_names_its_own_apis_model_list_and_not_the_others(
    api: Api, listed: str, other: str
) -> None:
    message = model_not_found("m", api).message
    assert message == (
        f"The model `m` does not exist or you do not have access to it. "
        f"{listed} lists the models you can use."
    )
    assert other not in message


def test_an_explicit_type_is_kept_in_anthropic_and_mapped_from_the_status_in_openai() -> None:
    reply = GatewayError(400, "m", type="request_too_large").reply
    assert ANTHROPIC.body(reply, RID) == anthropic_json("request_too_large")
    assert OPENAI.body(reply, RID) == openai_json("invalid_request_error", None)


@pytest.mark.parametrize(
    ("retry_after", "header"),
    [(None, None), (0.0, "1"), (0.2, "1"), (1.0, "1"), (1.5, "2"), (2, "2"), (59.01, "60")],
)
def test_retry_after_is_whole_seconds_and_at_least_one(
    retry_after: float | None, header: str | None
) -> None:
    reply = GatewayError(429, "m", retry_after=retry_after).reply
    for renderer in RENDERERS.values():
        headers = renderer.response(reply, RID).headers
        assert headers.get("retry-after") == header
        assert list(headers) == ([] if header is None else ["retry-after"])


def test_headers_are_the_edges_under_the_replys_own() -> None:
    reply = GatewayError(
        429, "m", retry_after=3, headers={"x-ratelimit-limit-requests": "5", "x-a": "reply"}
    ).reply
    edge = {"x-a": "edge", "x-b": "edge", "retry-after": "99"}
    for renderer in RENDERERS.values():
        assert renderer.response(reply, RID, edge).headers == {
            "x-a": "reply",
            "x-b": "edge",
            "retry-after": "3",
            "x-ratelimit-limit-requests": "5",
        }
    assert edge == {"x-a": "edge", "x-b": "edge", "retry-after": "99"}


def test_gateway_error_carries_its_reply() -> None:
    err = GatewayError(
        503,
        "images[0]: busy",
        param="images[0]",
        code="c",
        retry_after=2,
        headers={"x-h": "1"},
    )
    assert err.reply == ReplyError(
        status=503,
        type="overloaded_error",
        message="images[0]: busy",
        param="images[0]",
        code="c",
        retry_after=2,
        headers={"x-h": "1"},
    )
    assert (err.status, err.type, err.message, err.param, err.code, err.retry_after) == (
        503,
        "overloaded_error",
        "images[0]: busy",
        "images[0]",
        "c",
        2,
    )
    assert err.headers == {"x-h": "1"}
    assert str(err) == "images[0]: busy"
    assert invalid("tools.0", "bad").reply == ReplyError(
        status=400, type="invalid_request_error", message="tools.0: bad", param="tools.0"
    )


def test_reply_and_gateway_error_round_trip() -> None:
    err = GatewayError(429, "slow down", retry_after=1.5, headers={"x-h": "1"})
    wire = envelopes.decode_reply(envelopes.encode(err.reply))
    assert wire == err.reply
    assert isinstance(wire, ReplyError)
    back = GatewayError.from_reply(wire)
    assert back.reply is wire
    assert str(back) == "slow down"
    assert (back.status, back.type, back.retry_after, back.headers) == (
        429,
        "rate_limit_error",
        1.5,
        {"x-h": "1"},
    )
    with pytest.raises(GatewayError) as info:
        raise GatewayError.from_reply(UNRECORDED)
    assert info.value.reply is UNRECORDED


def test_with_headers_adds_over_its_own_and_never_changes_the_original() -> None:
    reply = ReplyError(status=500, type="api_error", message="m", headers={"a": "1", "b": "1"})
    assert reply.with_headers({}) is reply
    added = reply.with_headers({"b": "2", "c": "2"})
    assert added.headers == {"a": "1", "b": "2", "c": "2"}
    assert added == ReplyError(
        status=500, type="api_error", message="m", headers={"a": "1", "b": "2", "c": "2"}
    )
    assert reply.headers == {"a": "1", "b": "1"}
    assert UNRECORDED.with_headers({"x": "1"}).headers == {"x": "1"}
    assert UNRECORDED.headers == {}
