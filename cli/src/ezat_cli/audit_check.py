"""`ezat audit verify`: the audit log's hash chain, checked over what the admin API lists, with
the shared rule (ezat_common/audit.py; docs/tenancy.md, "Audit log").

Pure: the API's entries in, the first broken seq and why out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
from ezat_common import audit


def first_break(entries: Sequence[Mapping[str, Any]]) -> tuple[int, str] | None:
    """The seq of the first entry that breaks the chain and why; None when it holds."""
    try:
        chain = msgspec.convert(list(entries), list[audit.Entry])
    except msgspec.ValidationError as exc:
        return -1, f"the admin API listed an entry that is not one: {exc}"
    bad = audit.verify(chain)
    if not bad:
        return None
    entry = next(e for e in chain if e.seq == bad[0])
    if entry.hash != audit.entry_hash(entry.prev_hash, entry):
        why = "its content no longer matches its hash (the row was changed)"
    else:
        why = "it does not follow the entry before it (a row was changed, deleted or inserted)"
    more = f"; also at seq {', '.join(map(str, bad[1:6]))}" if len(bad) > 1 else ""
    return bad[0], why + more
