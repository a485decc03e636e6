"""How long the router waits on a deployment, and what a usable 2xx answer looks like (pure).

Three waits (docs/routing.md "Timeouts"):

- until the first byte: a *stream* (and count_tokens, which runs no model) answers with its
  headers and ``message_start`` within seconds, so ``stream_first_byte_timeout`` bounds both;
  a *non-streamed* answer has its headers only once the whole message is written, minutes for a
  long one, so ``first_byte_timeout`` bounds it. ``first_byte_timeout`` is the longest first
  wait of any request (the edge derives its own first-reply timeout from it), so a stream never
  waits longer than it either: an operator who lowers ``first_byte_timeout`` to 4 s gets 4 s
  for streams too, not the 30 s stream default (issue 26);
- between two reads of a started stream: ``between_events_timeout`` (deployments ping a quiet
  stream, so silence that long is a dead stream, not a thinking model).

A 2xx whose ``content-type`` is not what was asked for (an HTML page from a proxy or a captive
portal, JSON for a stream) is a protocol error, known before a byte of it is read.
"""

from __future__ import annotations

from ezat_common.config import RouterConfig

EVENT_STREAM = "text/event-stream"


def streams_events(stream: bool, api: str) -> bool:
    """Whether the upstream answers this request as Server-Sent Events."""
    return stream and api != "count_tokens"


def first_byte_bound(cfg: RouterConfig, *, stream: bool, api: str) -> float:
    """Seconds from the start of an attempt until it must have shown it works: the response
    headers and, for a stream, its first event."""
    if streams_events(stream, api) or api == "count_tokens":
        return min(cfg.stream_first_byte_timeout, cfg.first_byte_timeout)
    return cfg.first_byte_timeout


def content_type(value: str | None) -> str:
    """``text/html; charset=utf-8`` -> ``text/html``; empty when absent."""
    if not value:
        return ""
    return value.split(";", 1)[0].strip().lower()


def content_type_ok(events: bool, value: str | None, stream_type: str = EVENT_STREAM) -> bool:
    """Whether a 2xx with this ``content-type`` can be the answer: the deployment's stream type
    (``stream_type``: Server-Sent Events, or Bedrock's AWS event stream) when ``events``, else
    JSON. An absent header is given the benefit of the doubt (the body is parsed anyway)."""
    kind = content_type(value)
    if not kind:
        return True
    if events:
        return kind == stream_type
    return kind == "application/json" or kind.endswith("+json")
