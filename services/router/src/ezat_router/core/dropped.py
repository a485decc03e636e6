"""What a deployment's log says about the betas and fields its kind refused (pure).

A Bedrock or Vertex deployment drops the ``anthropic-beta`` values its kind does not accept
(``core/kinds``). Those values are the client's: any string, as many distinct ones as a client
cares to send. Remembering each one forever, and logging each new one, cost a router 40 to 54 MB
and 180,000 log lines per 200 requests of fresh values (issue 26). So a deployment remembers at
most ``capacity`` values (least recently seen forgotten first), only for de-duplicating its log,
and logs at most one line per ``interval`` seconds, naming a few new values and how many more
were left out since the last line. The counter ``ezat_router_dropped_total`` counts every one.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

# Distinct refused values a deployment remembers for its log's de-duplication.
CAPACITY = 256
# At most one log line per deployment this often (seconds).
INTERVAL = 60.0
# A line names at most this many values, each cut to this many characters; a value is
# remembered by its first KEY_CHARS characters (a header's worth each would be 256 x 16 KB).
NAMED = 5
NAME_CHARS = 64
KEY_CHARS = 128


@dataclass(frozen=True, slots=True)
class Notice:
    """One log line: values seen for the first time (a few, cut short) and how many new values
    were not named, in this request or since the last line."""

    named: tuple[str, ...]
    suppressed: int


class DroppedLog:
    """One deployment's memory of what it refused, bounded in entries and in log lines."""

    __slots__ = ("_capacity", "_interval", "_next_at", "_seen", "_suppressed")

    def __init__(self, capacity: int = CAPACITY, interval: float = INTERVAL) -> None:
        self._capacity = capacity
        self._interval = interval
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._next_at = float("-inf")
        self._suppressed = 0

    def __len__(self) -> int:
        return len(self._seen)

    def note(self, values: tuple[str, ...], now: float) -> Notice | None:
        """Remember ``values`` (``what:value`` keys); a ``Notice`` when a line is due now."""
        new: list[str] = []
        seen = self._seen
        for value in values:
            value = value[:KEY_CHARS]
            if value in seen:
                seen.move_to_end(value)
                continue
            seen[value] = None
            if len(seen) > self._capacity:
                seen.popitem(last=False)
            new.append(value)
        if not new:
            return None
        if now < self._next_at:
            self._suppressed += len(new)
            return None
        named = tuple(v[:NAME_CHARS] for v in new[:NAMED])
        notice = Notice(named, self._suppressed + len(new) - len(named))
        self._suppressed = 0
        self._next_at = now + self._interval
        return notice
