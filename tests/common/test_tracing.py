"""ezat_common.tracing: on only when an OTLP endpoint is configured, spans parented on a W3C
traceparent and exported over OTLP/HTTP; off, OpenTelemetry is not even imported. Each case runs
in a process of its own, as a service would (the tracer provider is process-wide)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from ezat_common import tracing
from support.otlp import receiving

CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"


@pytest.mark.parametrize(
    ("env", "wanted"),
    [
        ({}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, True),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_SDK_DISABLED": "true"},
            False,
        ),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": ""}, False),
    ],
)
def test_tracing_is_on_only_with_an_endpoint(env: dict[str, str], wanted: bool) -> None:
    assert tracing.wanted(env) is wanted


GOOD = f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"


@pytest.mark.parametrize(
    ("value", "passed_on"),
    [
        (GOOD, GOOD),
        (f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-00", f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-00"),
        # A later version is read by its first four fields and passed on as version 00: its
        # further fields (arbitrary text) never travel on.
        (f"01-{CLIENT_TRACE}-{CLIENT_SPAN}-01-more", GOOD),
        (f"01-{CLIENT_TRACE}-{CLIENT_SPAN}-01-<script>\r\nx: y", GOOD),
        (f"cc-{CLIENT_TRACE}-{CLIENT_SPAN}-01", GOOD),
        (f"01-{CLIENT_TRACE}-{CLIENT_SPAN}-01junk", None),  # fields follow a dash
        (f"01-{CLIENT_TRACE}-{CLIENT_SPAN}", None),  # shorter than version 00
        (f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01-more", None),  # version 00 has none
        (f"ff-{CLIENT_TRACE}-{CLIENT_SPAN}-01", None),
        (f"00-{'0' * 32}-{CLIENT_SPAN}-01", None),  # all-zero ids are invalid
        (f"00-{CLIENT_TRACE}-{'0' * 16}-01", None),
        (f"01-{'0' * 32}-{CLIENT_SPAN}-01-x", None),
        (f"00-{CLIENT_TRACE.upper()}-{CLIENT_SPAN}-01", None),  # lower-case hex only
        (f"0A-{CLIENT_TRACE}-{CLIENT_SPAN}-01", None),
        (f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-0G", None),
        (GOOD + " ", None),
        ("00-abc-def-01", None),
        ("hello", None),
        ("", None),
        (None, None),
    ],
)
def test_only_a_valid_traceparent_is_passed_on(value: str | None, passed_on: str | None) -> None:
    assert tracing.valid(value) == passed_on


MEMBER = "vendor=opaque-Value_1"


@pytest.mark.parametrize(
    ("value", "kept"),
    [
        (MEMBER, MEMBER),
        (f" {MEMBER} ,, tenant@sys=x ", f"{MEMBER},tenant@sys=x"),  # empty members dropped
        (",".join(f"k{i}=v" for i in range(32)), ",".join(f"k{i}=v" for i in range(32))),
        (",".join(f"k{i}=v" for i in range(33)), None),  # at most 32 members
        ("a=" + "x" * 256, "a=" + "x" * 256),
        ("a=" + "x" * 257, None),  # a value has at most 256 characters
        (",".join(f"k{i:03}=" + "v" * 40 for i in range(12)), None),  # over 512 characters
        ("Vendor=x", None),  # keys are lower case
        ("a=b,a=c", None),  # a key twice
        ("a=b c ", "a=b c"),  # spaces around a member are not part of it
        ("a=b\tc", None),  # nor is a tab in a value
        ("a=b=c", None),
        ("a=\u00e9", None),  # printable ASCII only
        ("a", None),
        ("@sys=x", None),
        ("", None),
        (None, None),
    ],
)
def test_only_a_valid_tracestate_is_kept(value: str | None, kept: str | None) -> None:
    assert tracing.valid_state(value) == kept


def run(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_off_the_sdk_is_not_imported_and_no_span_is_made() -> None:
    done = run(
        """
        import sys
        from ezat_common import tracing
        assert tracing.setup("edge") is False and tracing.ENABLED is False
        assert not [m for m in sys.modules if m.startswith("opentelemetry")], sys.modules
        assert tracing.headers(None) is None
        assert tracing.headers("00-ab-cd-01") == {"traceparent": "00-ab-cd-01"}
        """
    )
    assert done.returncode == 0, done.stderr


def test_on_a_span_continues_the_callers_trace_and_is_exported() -> None:
    with receiving() as receiver:
        done = run(
            f"""
            from opentelemetry.trace import SpanKind
            from ezat_common import tracing
            assert tracing.setup("router")
            span = tracing.start(
                "chat m", "00-{CLIENT_TRACE}-{CLIENT_SPAN}-01", SpanKind.CLIENT,
                {{"gen_ai.request.model": "m"}},
            )
            child = tracing.start("child", tracing.traceparent(span))
            child.end()
            tracing.failed(span, "upstream 529")
            span.end()
            print(tracing.exemplar(span)["trace_id"])
            tracing.shutdown()
            """,
            OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == CLIENT_TRACE
        spans = {s.name: s for s in receiver.of_trace(CLIENT_TRACE, at_least=2)}
    parent, child = spans["chat m"], spans["child"]
    assert parent.service == "ezat-router"
    assert parent.parent_span_id == CLIENT_SPAN
    assert child.parent_span_id == parent.span_id
    assert parent.attributes == {"gen_ai.request.model": "m"}
    assert parent.error and not child.error
    assert parent.kind == 3  # CLIENT
