"""The audit log's hash chain (docs/tenancy.md, "Audit log"): pure, no I/O.

Every admin write appends one entry ``{seq, at, actor, action, target, before, after, prev_hash,
hash}``. ``hash`` is the SHA-256 (hex) of ``prev_hash`` followed by the canonical JSON of
``{seq, at, actor, action, target, before, after}`` (keys sorted, no spaces, UTF-8, non-ASCII
characters as themselves); ``at`` is RFC 3339 in UTC with microseconds
(``2026-12-05T00:13:26.123456Z``). The first entry's ``prev_hash`` is 64 zeros. A changed,
inserted or deleted row then breaks the chain at that row: ``verify`` names its ``seq``.
"""

from __future__ import annotations

import datetime
import hashlib
import json
from typing import Any

import msgspec

GENESIS = "0" * 64


class Entry(msgspec.Struct, kw_only=True):
    """One audit entry as the admin API lists it (``at`` already in its RFC 3339 form)."""

    seq: int
    at: str
    actor: str
    action: str
    target: str
    before: Any = None
    after: Any = None
    prev_hash: str = GENESIS
    hash: str = ""


def at_text(moment: datetime.datetime) -> str:
    """``moment`` as the chain spells it: UTC, always six fractional digits, ``Z``."""
    utc = moment.astimezone(datetime.UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def canonical(entry: Entry) -> bytes:
    """The bytes of ``entry`` that its hash covers (everything but the two hashes)."""
    body = {
        "seq": entry.seq,
        "at": entry.at,
        "actor": entry.actor,
        "action": entry.action,
        "target": entry.target,
        "before": entry.before,
        "after": entry.after,
    }
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode()


def entry_hash(prev_hash: str, entry: Entry) -> str:
    return hashlib.sha256(prev_hash.encode() + canonical(entry)).hexdigest()


def chained(previous: Entry | None, entry: Entry) -> Entry:
    """``entry`` appended after ``previous`` (None: the first): its seq, prev_hash and hash."""
    seq = 1 if previous is None else previous.seq + 1
    prev_hash = GENESIS if previous is None else previous.hash
    linked = msgspec.structs.replace(entry, seq=seq, prev_hash=prev_hash, hash="")
    return msgspec.structs.replace(linked, hash=entry_hash(prev_hash, linked))


def verify(entries: list[Entry]) -> list[int]:
    """The seqs where the chain breaks, in order; empty when it holds. ``entries`` are the whole
    log ordered by seq. An entry is bad when its own hash does not match its content (changed),
    when its ``prev_hash`` is not the stored hash of the entry before it, or when its seq does not
    follow the one before (an entry deleted or inserted there)."""
    bad: list[int] = []
    prev_hash, prev_seq = GENESIS, 0
    for entry in entries:
        linked = entry.prev_hash == prev_hash and entry.seq == prev_seq + 1
        if not linked or entry.hash != entry_hash(entry.prev_hash, entry):
            bad.append(entry.seq)
        prev_hash, prev_seq = entry.hash, entry.seq
    return bad
