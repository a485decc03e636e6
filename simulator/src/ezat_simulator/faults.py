"""Injected faults: what ``POST /_sim/faults`` arms for the next requests to ``/v1/messages``.

A fault may delay the answer (``delay_ms``), replace it with an HTTP error (``status``, with
``retry-after`` on 429/529 or when ``retry_after`` is given), or break the stream midway
(``fail_after`` / ``drop_after``, as the directives of the same names do). It applies to the next
``count`` requests; ``count: -1`` keeps it until ``DELETE /_sim/faults``.
"""

from __future__ import annotations

import msgspec


class Fault(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, omit_defaults=True):
    status: int | None = None
    count: int = 1
    retry_after: float | None = None
    delay_ms: float = 0.0
    fail_after: int | None = None
    drop_after: int | None = None

    def problem(self) -> str | None:
        """Why this fault cannot be armed, or None."""
        if self.status is not None and not 400 <= self.status <= 599:
            return "status: must be an HTTP error status (400-599)"
        if self.count == 0 or self.count < -1:
            return "count: must be at least 1, or -1 for until cleared"
        if self.delay_ms < 0 or (self.retry_after is not None and self.retry_after < 0):
            return "delay_ms and retry_after must not be negative"
        for name in ("fail_after", "drop_after"):
            value = getattr(self, name)
            if value is not None and value < 0:
                return f"{name}: must not be negative"
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
