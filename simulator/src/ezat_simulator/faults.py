"""Injected faults: what ``POST /_sim/faults`` arms for the next requests to ``/v1/messages``.

A fault may delay the answer (``delay_ms``), replace it with an HTTP error (``status``, with
``retry-after`` on 429/529 or when ``retry_after`` is given), or break the stream midway
(``fail_after`` / ``drop_after`` / ``stall_after``, as the directives of the same names do). It
applies to the next ``count`` requests; ``count: -1`` keeps it until ``DELETE /_sim/faults``.

Misbehaviour of a deployment that is not an error answer (issue 13), each keeping the connection
open until the client gives up:

- ``never_answer``: the request is read and never answered (no status line at all); a huge
  ``delay_ms`` does the same for that long;
- ``stall_before_start``: 200 and the headers, then nothing (no ``message_start``; no body);
- ``stall_after: K``: a stream sends K content tokens, then nothing (no ping, no end); a JSON
  answer sends its headers and the first half of its body, then nothing;
- ``html``: 200 with ``content-type: text/html`` and an HTML page (a proxy's or a captive
  portal's), for JSON and stream requests alike.

On the Bedrock face (``bedrock.py``) ``status`` becomes Bedrock's error type for it, and
``bedrock_exception`` names one directly (``ThrottlingException``, ``ModelNotReadyException``,
``ServiceQuotaExceededException``, ...; ``throttlingException`` spelling too): alone it is that
HTTP error; with ``fail_after: K`` a stream sends K content tokens and then that exception as an
event-stream ``exception`` message (only the types a Bedrock stream carries). The other faces
ignore ``bedrock_exception``.
"""

from __future__ import annotations

import msgspec

from .bedrock_wire import STATUS_OF_TYPE, STREAM_EXCEPTIONS, exception_name


class Fault(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, omit_defaults=True):
    status: int | None = None
    count: int = 1
    retry_after: float | None = None
    delay_ms: float = 0.0
    fail_after: int | None = None
    drop_after: int | None = None
    stall_after: int | None = None
    stall_before_start: bool = False
    never_answer: bool = False
    html: bool = False
    bedrock_exception: str | None = None

    @property
    def breaks_stream(self) -> bool:
        return (
            self.fail_after is not None
            or self.drop_after is not None
            or (self.stall_after is not None)
        )

    def problem(self) -> str | None:
        """Why this fault cannot be armed, or None."""
        if self.status is not None and not 400 <= self.status <= 599:
            return "status: must be an HTTP error status (400-599)"
        if self.count == 0 or self.count < -1:
            return "count: must be at least 1, or -1 for until cleared"
        if self.delay_ms < 0 or (self.retry_after is not None and self.retry_after < 0):
            return "delay_ms and retry_after must not be negative"
        for name in ("fail_after", "drop_after", "stall_after"):
            value = getattr(self, name)
            if value is not None and value < 0:
                return f"{name}: must not be negative"
        return self._bedrock_problem()

    def _bedrock_problem(self) -> str | None:
        if self.bedrock_exception is None:
            return None
        name = exception_name(self.bedrock_exception)
        if self.status is not None:
            return "bedrock_exception: give it or status, not both"
        if name not in STATUS_OF_TYPE:
            return f"bedrock_exception: {self.bedrock_exception} is not a Bedrock error type"
        if self.fail_after is not None and name not in STREAM_EXCEPTIONS:
            known = ", ".join(sorted(STREAM_EXCEPTIONS))
            return f"bedrock_exception: a stream carries only {known}"
        return None


decode_fault = msgspec.json.Decoder(Fault).decode


def retry_after_header(status: int, retry_after: float | None) -> str | None:
    """``retry-after`` for an error answer: as asked, else 1 s on 429 and 529."""
    if retry_after is not None:
        return f"{retry_after:g}"
    return "1" if status in (429, 529) else None


class Faults:
    """The armed fault and how many more requests it hits."""

    def __init__(self) -> None:
        self.fault: Fault | None = None
        self.remaining = 0

    def arm(self, fault: Fault) -> None:
        self.fault = fault
        self.remaining = fault.count

    def clear(self) -> None:
        self.fault = None
        self.remaining = 0

    def take(self) -> Fault | None:
        """The fault for the request arriving now, if any (spends one of its count)."""
        fault = self.fault
        if fault is None:
            return None
        if self.remaining > 0:
            self.remaining -= 1
            if self.remaining == 0:
                self.fault = None
        return fault

    def describe(self) -> dict[str, object]:
        return {"fault": self.fault, "remaining": self.remaining}
