"""`ezat audit verify`: the audit log's hash chain, checked over what the admin API lists.

Pure. Each entry's ``hash`` is sha256 hex of its ``prev_hash`` followed by the canonical JSON
(sorted keys, no spaces) of ``{seq, at, actor, action, target, before, after}``; the first
entry's ``prev_hash`` is 64 zeros and each later one is the hash before it, so a changed,
inserted or deleted row breaks the chain at that row.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

GENESIS = "0" * 64
HASHED = ("seq", "at", "actor", "action", "target", "before", "after")


def entry_hash(prev_hash: str, entry: Mapping[str, Any]) -> str:
    body = {name: entry.get(name) for name in HASHED}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256((prev_hash + canonical).encode()).hexdigest()


def first_break(entries: Sequence[Mapping[str, Any]]) -> tuple[int, str] | None:
    """The seq of the first entry that breaks the chain and why; None when it holds."""
    prev = GENESIS
    for entry in entries:
        seq = int(entry.get("seq", -1))
        if entry.get("prev_hash") != prev:
            return seq, "its prev_hash is not the hash of the entry before it"
        if entry.get("hash") != entry_hash(prev, entry):
            return seq, "its hash does not match its content"
        prev = str(entry["hash"])
    return None
