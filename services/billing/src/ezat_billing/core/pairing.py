"""Pairing complete records with the edge's delivery confirmations in the outbox drain
(docs/billing.md, "Billed only when delivered").

A complete record reaches the outbox just before its final event is written, and the edge's
confirmation (``Delivered``, batched every 0.1 s) just after, so the two usually arrive in
successive drained batches. Stored apart, the record costs an INSERT of a row
``awaiting_delivery`` and then an UPDATE clearing it. Held back for up to ``hold`` seconds
(its message not yet acknowledged, so nothing is lost if billing dies meanwhile), a record whose
confirmation comes in that time is inserted confirmed: one write instead of two. A record that
waits longer (or when the drain is asked to flush: a read barrier, a full hold) is stored
``awaiting_delivery`` as before, and its confirmation, whenever it comes, clears the flag.

Pure: tokens are whatever the adapter acknowledges (the JetStream messages).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import msgspec

from .rows import UsageRow

T = TypeVar("T")

HOLD = 0.25  # seconds: more than the edge's 0.1 s confirmation batching plus a drain round
LIMIT = 1000  # records held at most (their messages count against the consumer's ack limit)


@dataclass(slots=True)
class Batch(Generic[T]):
    """What one drain round writes: ``rows`` in one INSERT, then ``unmatched`` confirmations
    (their records stored earlier, or by another replica), then ``tokens`` acknowledged.
    ``matched`` rows go in confirmed; one the INSERT finds stored already (awaiting) still
    needs its confirmation applied (``late``)."""

    rows: list[UsageRow] = field(default_factory=list)
    unmatched: list[str] = field(default_factory=list)
    tokens: list[T] = field(default_factory=list)
    matched: list[str] = field(default_factory=list)

    def late(self, inserted: Iterable[str]) -> list[str]:
        """The confirmations to apply after the INSERT: unmatched ones, and matched ones whose
        row was there before (``inserted`` holds the uids the INSERT wrote)."""
        new = set(inserted)
        return self.unmatched + [uid for uid in self.matched if uid not in new]


class Pairing(Generic[T]):
    def __init__(self, hold: float = HOLD, limit: int = LIMIT) -> None:
        self.hold = hold
        self.limit = limit
        # uid -> (row, its token, when it began to wait); insertion order is age order.
        self._waiting: dict[str, tuple[UsageRow, T, float]] = {}

    def __len__(self) -> int:
        return len(self._waiting)

    @property
    def next_due(self) -> float | None:
        """When the oldest waiting record is to be stored anyway (None: nothing waits)."""
        for _, _, since in self._waiting.values():
            return since + self.hold
        return None

    def take_all(self) -> list[tuple[UsageRow, T]]:
        """Every waiting record, forgotten here (the drain stops: their messages go back)."""
        waiting = [(row, token) for row, token, _ in self._waiting.values()]
        self._waiting.clear()
        return waiting

    def round(
        self,
        rows: Iterable[tuple[UsageRow, T]],
        delivered: Sequence[str],
        now: float,
        flush: bool = False,
    ) -> Batch[T]:
        """One drained batch: its valid rows with their tokens and its confirmations."""
        batch: Batch[T] = Batch()
        confirmed = set(delivered)
        for row, token in rows:
            if not row.awaiting_delivery:  # not complete: nothing to wait for
                batch.rows.append(row)
                batch.tokens.append(token)
            elif row.uid in confirmed:
                confirmed.discard(row.uid)
                self._confirmed(batch, row, token)
            elif row.uid in self._waiting:
                # The same record again (a redelivery): written now, as it is; the waiting copy
                # is written later and conflicts, harmlessly.
                batch.rows.append(row)
                batch.tokens.append(token)
            else:
                self._waiting[row.uid] = (row, token, now)
        for uid in delivered:
            if uid in confirmed and uid in self._waiting:
                confirmed.discard(uid)
                row, token, _ = self._waiting.pop(uid)
                self._confirmed(batch, row, token)
        self._store_due(batch, now, flush)
        batch.unmatched = [uid for uid in delivered if uid in confirmed]
        return batch

    @staticmethod
    def _confirmed(batch: Batch[T], row: UsageRow, token: T) -> None:
        batch.rows.append(msgspec.structs.replace(row, awaiting_delivery=False))
        batch.tokens.append(token)
        batch.matched.append(row.uid)

    def _store_due(self, batch: Batch[T], now: float, flush: bool) -> None:
        while self._waiting:
            uid, (row, token, since) = next(iter(self._waiting.items()))
            if not (flush or since + self.hold <= now or len(self._waiting) > self.limit):
                return
            del self._waiting[uid]
            batch.rows.append(row)  # awaiting_delivery: its confirmation clears it later
            batch.tokens.append(token)
