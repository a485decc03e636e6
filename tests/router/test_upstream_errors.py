"""core.upstream_errors: what each upstream failure means for the client and the deployment."""

from __future__ import annotations

import msgspec
import pytest
from ezat_common.config import RouterConfig
from ezat_common.envelopes import ReplyError
from ezat_common.errors import http_headers
from ezat_common.schemas.anthropic import ErrorInfo
from ezat_router.core.health import FAULT_COOLDOWN
from ezat_router.core.upstream_errors import (
    all_down,
    from_status,
    from_stream_error,
    from_transport,
    parse_retry_after,
)

MODEL = "claude-x"
# What a 429 without retry-after rests for, and what its client is told, by default.
COOLDOWN = RouterConfig().cooldown_default_seconds


def body(kind: str, message: str) -> bytes:
    return msgspec.json.encode({"type": "error", "error": {"type": kind, "message": message}})


@pytest.mark.parametrize(
    ("status", "retry_after", "client_status", "client_type", "retryable", "health", "wait"),
    [
        # health: ("rest", seconds or None for the configured default), "fault" or None
        (429, None, 429, "rate_limit_error", True, ("rest", None), COOLDOWN),
        (429, "12", 429, "rate_limit_error", True, ("rest", 12.0), 12.0),
        (529, None, 529, "overloaded_error", True, "fault", FAULT_COOLDOWN),
        (503, "7", 529, "overloaded_error", True, "fault", 7.0),
        (500, None, 500, "api_error", True, "fault", None),
        (502, None, 502, "api_error", True, "fault", None),
        (504, None, 504, "timeout_error", True, "fault", None),
        (401, None, 500, "api_error", True, "fault", None),  # the deployment's key
        (403, None, 500, "api_error", True, "fault", None),
        (400, None, 400, "invalid_request_error", False, None, None),
        (404, None, 404, "not_found_error", False, None, None),
        (413, None, 413, "request_too_large", False, None, None),
    ],
)
def test_status_mapping(
    status: int,
    retry_after: str | None,
    client_status: int,
    client_type: str,
    retryable: bool,
    health: object,
    wait: float | None,
) -> None:
    kind = {400: "invalid_request_error", 404: "not_found_error", 413: "request_too_large"}
    raw = body(kind.get(status, "api_error"), "m")
    failure = from_status(status, raw, retry_after, MODEL, cooldown_default=COOLDOWN)
    assert failure.error.status == client_status
    assert failure.error.type == client_type
    assert failure.retryable is retryable
    if isinstance(health, tuple):
        assert failure.rate_limited and not failure.fault
        assert failure.cooldown == health[1]
    else:
        assert failure.fault is (health == "fault")
        assert not failure.rate_limited and failure.cooldown is None
    assert failure.error.retry_after == wait


def test_client_error_relays_the_upstream_message() -> None:
    failure = from_status(
        400,
        body("invalid_request_error", "max_tokens: too big"),
        None,
        MODEL,
        cooldown_default=COOLDOWN,
    )
    assert failure.error.message == "max_tokens: too big"
    assert failure.error.relayed  # the request log keeps the gateway's words instead


@pytest.mark.parametrize("raw", [b"", b"not json", b'{"error": 5}', b"[]"])
def test_client_error_with_unreadable_body_gets_a_generic_message(raw: bytes) -> None:
    failure = from_status(422, raw, None, MODEL, cooldown_default=COOLDOWN)
    assert failure.error.status == 422
    assert failure.error.type == "invalid_request_error"
    assert "HTTP 422" in failure.error.message
    assert not failure.error.relayed  # the gateway's own words


def test_unknown_error_type_falls_back_to_the_status() -> None:
    failure = from_status(400, body("weird_error", "x"), None, MODEL, cooldown_default=COOLDOWN)
    assert failure.error.type == "invalid_request_error"


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (None, None),
        ("", None),
        ("3", 3.0),
        (" 1.5 ", 1.5),
        ("-1", None),
        ("nan", None),
        ("Wed, 21 Oct 2015 07:28:00 GMT", None),
    ],
)
def test_parse_retry_after(value: str | None, seconds: float | None) -> None:
    assert parse_retry_after(value) == seconds


@pytest.mark.parametrize(
    ("kind", "status", "type_"),
    [
        ("connect", 529, "overloaded_error"),
        ("timeout", 504, "timeout_error"),
        ("dropped", 500, "api_error"),
        ("protocol", 500, "api_error"),
    ],
)
def test_transport_failures(kind: str, status: int, type_: str) -> None:
    failure = from_transport(kind, MODEL, 30.0)
    assert (failure.error.status, failure.error.type) == (status, type_)
    assert failure.retryable and failure.fault and not failure.rate_limited
    assert MODEL in failure.error.message or kind == "dropped"


def test_messages_name_the_model_and_no_host() -> None:
    for failure in [
        from_transport("connect", MODEL, 30.0),
        from_transport("timeout", MODEL, 30.0),
        from_status(
            502, b"<html>bad gateway at 10.0.0.7</html>", None, MODEL, cooldown_default=COOLDOWN
        ),
        from_status(529, b"", None, MODEL, cooldown_default=COOLDOWN),
    ]:
        assert f"`{MODEL}`" in failure.error.message
        assert "://" not in failure.error.message
        assert "10.0.0.7" not in failure.error.message
    assert from_transport("connect", MODEL, 30.0).error.retry_after == FAULT_COOLDOWN


@pytest.mark.parametrize(
    ("kind", "status", "retryable", "wait"),
    [
        ("overloaded_error", 529, True, FAULT_COOLDOWN),
        ("api_error", 500, True, None),
        ("rate_limit_error", 429, True, COOLDOWN),
        ("invalid_request_error", 400, False, None),
        ("something_new", 500, True, None),
    ],
)
def test_stream_error_event(kind: str, status: int, retryable: bool, wait: float | None) -> None:
    failure = from_stream_error(ErrorInfo(type=kind, message="boom"), cooldown_default=COOLDOWN)
    assert failure.error.status == status
    assert failure.error.type == (kind if kind != "something_new" else "api_error")
    assert failure.error.message == "boom" and failure.error.relayed
    assert failure.retryable is retryable
    assert failure.error.retry_after == wait
    assert (failure.fault or failure.rate_limited) is retryable
    assert failure.rate_limited is (status == 429)


def test_a_429_and_all_rate_limited_deployments_say_the_same() -> None:
    limited = ReplyError(
        status=429,
        type="rate_limit_error",
        message=f"the deployments of `{MODEL}` are rate limited; retry after 12 seconds",
        retry_after=12.0,
    )
    # The same words; the one from a deployment also names its status (the request log's).
    said = from_status(429, b"", "12", MODEL, cooldown_default=COOLDOWN).error
    assert said == msgspec.structs.replace(limited, upstream_status=429)
    assert all_down(MODEL, 12.0, all_limited=True) == limited
    assert all_down(MODEL, 3.0, all_limited=False) == ReplyError(
        status=529,
        type="overloaded_error",
        message=f"every deployment of `{MODEL}` is unavailable; retry after 3 seconds",
        retry_after=3.0,
    )


def test_a_429_without_retry_after_tells_the_client_the_configured_rest() -> None:
    failure = from_status(429, b"", None, MODEL, cooldown_default=7.0)
    assert failure.error.retry_after == 7.0
    assert failure.error.message.endswith("retry after 7 seconds")
    assert failure.rate_limited and failure.cooldown is None  # the deployment rests the default
    streamed = from_stream_error(
        ErrorInfo(type="rate_limit_error", message="x"), cooldown_default=7.0
    )
    assert streamed.error.retry_after == 7.0 and streamed.rate_limited


@pytest.mark.parametrize(("wait", "told"), [(0.0, "1"), (0.2, "1"), (2.2, "3"), (3.0, "3")])
@pytest.mark.parametrize("all_limited", [True, False])
def test_all_down_says_the_wait_as_the_retry_after_header_does(
    wait: float, told: str, all_limited: bool
) -> None:
    reply = all_down(MODEL, wait, all_limited=all_limited)
    assert reply.message.endswith(f"retry after {told} seconds")
    assert http_headers(reply)["retry-after"] == told


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422, 429, 500, 502, 503, 529])
def test_an_upstream_answer_names_its_status_for_the_request_log(status: int) -> None:
    failure = from_status(status, b"", None, MODEL, cooldown_default=COOLDOWN)
    assert failure.error.upstream_status == status


def test_no_upstream_answer_names_no_status() -> None:
    for kind in ("connect", "timeout", "stalled", "dropped", "protocol"):
        assert from_transport(kind, MODEL, 5.0).error.upstream_status is None  # type: ignore[arg-type]
    assert all_down(MODEL, 3.0, all_limited=False).upstream_status is None
