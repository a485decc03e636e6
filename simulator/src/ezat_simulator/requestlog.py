"""The log of received API requests that ``GET /_sim/requests`` shows (newest last, bounded).

Bodies are kept whole, so a test can compare what the gateway sent byte for byte. To bound
memory when a benchmark sends many big bodies (images, PDFs), the big bodies kept whole add up to
at most ``BODY_BUDGET`` bytes of JSON: past that, the oldest big ones get their long strings
replaced by a note such as ``"<10485760 characters>"``. The newest body always stays whole.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any, Literal

import msgspec

Outcome = Literal["active", "complete", "cancelled", "error", "dropped", "html"]
DEFAULT_SIZE = 256
BODY_BUDGET = 128 * 1024 * 1024
_BIG_BODY = 256 * 1024
_LONG_STRING = 4096


class RequestRecord(msgspec.Struct, kw_only=True):
    id: str
    path: str
    headers: dict[str, str]
    body: Any = None
    started_at: float
    finished_at: float | None = None
    outcome: Outcome = "active"
    status: int | None = None
    tokens_sent: int = 0
    cancelled_at: float | None = None
    message_id: str | None = None
    # The reply's ``usage.server_tool_use`` (the searches the simulated model ran for it), so that
    # a test can bill-check what ran upstream, also for requests whose answer never reached it.
    server_tool_use: dict[str, int] | None = None


def shortened(value: Any) -> Any:
    """``value`` with every string longer than 4096 characters replaced by a short note."""
    if isinstance(value, str):
        return value if len(value) <= _LONG_STRING else f"<{len(value)} characters>"
    if isinstance(value, Mapping):
        return {k: shortened(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shortened(v) for v in value]
    return value


class RequestLog:
    def __init__(self, size: int = DEFAULT_SIZE, body_budget: int = BODY_BUDGET) -> None:
        self._records: deque[RequestRecord] = deque(maxlen=size)
        # Records whose big body is still whole, oldest first, with the body's size in bytes.
        self._big: deque[tuple[RequestRecord, int]] = deque()
        self._big_bytes = 0
        self._body_budget = body_budget
        self.total = 0
        self.active = 0

    def open(self, path: str, headers: Mapping[str, str], now: float) -> tuple[RequestRecord, int]:
        """A record for a request arriving now, and its number (which also numbers its message)."""
        self.total += 1
        self.active += 1
        record = RequestRecord(
            id=f"req_sim_{self.total}",
            path=path,
            headers={k.lower(): v for k, v in headers.items()},
            started_at=now,
        )
        self._records.append(record)
        return record, self.total

    def keep_body(self, record: RequestRecord, body: Any, size: int) -> None:
        record.body = body
        if size <= _BIG_BODY:
            return
        self._big.append((record, size))
        self._big_bytes += size
        while self._big_bytes > self._body_budget and len(self._big) > 1:
            old, old_size = self._big.popleft()
            old.body = shortened(old.body)
            self._big_bytes -= old_size

    def close(self, record: RequestRecord, outcome: Outcome, status: int, now: float) -> None:
        """Settle a record once; later calls (a cancel after a deliberate drop) change nothing."""
        if record.outcome != "active":
            return
        self.active -= 1
        record.outcome = outcome
        record.status = status
        record.finished_at = now
        if outcome == "cancelled":
            record.cancelled_at = now

    def last(self, limit: int) -> list[RequestRecord]:
        if limit <= 0:
            return []
        records = list(self._records)
        return records[-limit:]

    def clear(self) -> None:
        self._records.clear()
        self._big.clear()
        self._big_bytes = 0
        self.total = 0
        # `active` stays: requests in flight still finish and close their records.
