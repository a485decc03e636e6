"""The pure timeout and content-type rules (``core/timeouts.py``) and their client messages."""

from __future__ import annotations

import pytest
from ezat_common.config import RouterConfig
from ezat_router.core.timeouts import content_type, content_type_ok, first_byte_bound
from ezat_router.core.upstream_errors import from_transport

CFG = RouterConfig(first_byte_timeout=600.0, stream_first_byte_timeout=30.0)


def test_defaults_are_the_documented_ones() -> None:
    cfg = RouterConfig()
    assert (
        cfg.connect_timeout,
        cfg.stream_first_byte_timeout,
        cfg.first_byte_timeout,
        cfg.between_events_timeout,
    ) == (5.0, 30.0, 600.0, 60.0)


@pytest.mark.parametrize(
    ("stream", "api", "bound"),
    [
        (True, "messages", 30.0),  # message_start comes in seconds
        (True, "chat", 30.0),
        (False, "messages", 600.0),  # the whole answer comes with the headers
        (False, "chat", 600.0),
        (False, "count_tokens", 30.0),  # runs no model
        (True, "count_tokens", 30.0),
    ],
)
def test_first_byte_bound(stream: bool, api: str, bound: float) -> None:
    assert first_byte_bound(CFG, stream=stream, api=api) == bound


@pytest.mark.parametrize(
    ("stream", "api"),
    [(True, "messages"), (True, "chat"), (False, "count_tokens"), (False, "messages")],
)
def test_no_first_wait_is_longer_than_first_byte_timeout(stream: bool, api: str) -> None:
    # Issue 26: first_byte_timeout = 4 left streams on the 30 s default (a silent upstream held
    # a stream 30 s per attempt while the same request as JSON ended at 4 s).
    cfg = RouterConfig(first_byte_timeout=4.0)
    assert first_byte_bound(cfg, stream=stream, api=api) == 4.0


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        (None, ""),
        ("", ""),
        ("text/event-stream", "text/event-stream"),
        ("Text/Event-Stream; charset=utf-8", "text/event-stream"),
        (" application/json ;charset=UTF-8", "application/json"),
    ],
)
def test_content_type(value: str | None, kind: str) -> None:
    assert content_type(value) == kind


@pytest.mark.parametrize(
    ("events", "value", "ok"),
    [
        (True, "text/event-stream; charset=utf-8", True),
        (True, None, True),  # absent: the bytes decide
        (True, "text/html; charset=utf-8", False),  # a proxy's or portal's page
        (True, "application/json", False),  # a whole message where a stream was asked for
        (False, "application/json", True),
        (False, "application/problem+json", True),
        (False, None, True),
        (False, "text/html", False),
        (False, "text/plain", False),
        (False, "text/event-stream", False),
    ],
)
def test_content_type_ok(events: bool, value: str | None, ok: bool) -> None:
    assert content_type_ok(events, value) is ok


@pytest.mark.parametrize(
    ("kind", "status", "error_type", "words"),
    [
        ("timeout", 504, "timeout_error", "started answering within 30 seconds"),
        ("stalled", 504, "timeout_error", "sent nothing for 30 seconds mid-response"),
        ("protocol", 500, "api_error", "malformed response"),
        ("dropped", 500, "api_error", "stopped mid-response"),
        ("connect", 529, "overloaded_error", "could be reached"),
    ],
)
def test_transport_failures_fail_over_and_say_what_happened(
    kind: str, status: int, error_type: str, words: str
) -> None:
    failure = from_transport(kind, "claude-x", 30.0)  # type: ignore[arg-type]
    assert (failure.error.status, failure.error.type) == (status, error_type)
    assert words in failure.error.message
    assert kind == "dropped" or "`claude-x`" in failure.error.message
    assert failure.retryable and failure.fault  # failover before the first byte; breaker counts
    if kind == "stalled":
        assert "not charged" in failure.error.message
