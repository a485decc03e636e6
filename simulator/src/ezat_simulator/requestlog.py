"""The log of received API requests that ``GET /_sim/requests`` shows (newest last, bounded).

Large bodies (images, PDFs) are kept with their long strings shortened, so a benchmark full of
images cannot make the log hold gigabytes.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any, Literal

import msgspec

Outcome = Literal["complete", "cancelled", "error", "dropped"]
DEFAULT_SIZE = 256
_BIG_BODY = 256 * 1024
_LONG_STRING = 4096


class RequestRecord(msgspec.Struct, kw_only=True):
    id: str
    path: str
    headers: dict[str, str]
    body: Any = None
    started_at: float
    finished_at: float | None = None
    # None while the request is still being answered.
    outcome: Outcome | None = None
    status: int | None = None
    tokens_sent: int = 0
    cancelled_at: float | None = None
    message_id: str | None = None


def shortened(value: Any) -> Any:
    """``value`` with every string longer than 4096 characters replaced by a short note."""
    if isinstance(value, str):
        return value if len(value) <= _LONG_STRING else f"<{len(value)} characters>"
    if isinstance(value, Mapping):
        return {k: shortened(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shortened(v) for v in value]
    return value


def kept_body(body: Any, raw_size: int) -> Any:
    return shortened(body) if raw_size > _BIG_BODY else body


class RequestLog:
    def __init__(self, size: int = DEFAULT_SIZE) -> None:
        self._records: deque[RequestRecord] = deque(maxlen=size)
        self.total = 0
        self.active = 0

    def open(self, path: str, headers: Mapping[str, str], now: float) -> RequestRecord:
        """A record for a request arriving now; its number (``id``) also numbers the message."""
        self.total += 1
        self.active += 1
        record = RequestRecord(
            id=f"req_sim_{self.total}",
            path=path,
            headers={k.lower(): v for k, v in headers.items()},
            started_at=now,
        )
        self._records.append(record)
        return record

    def close(self, record: RequestRecord, outcome: Outcome, status: int, now: float) -> None:
        """Settle a record once; later calls (a cancel after a deliberate drop) change nothing."""
        if record.outcome is not None:
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
        self.total = 0
        # `active` stays: requests in flight still finish and close their records.
