"""`ezat audit verify`'s check over the API's entries (cli/src/ezat_cli/audit_check.py)."""

from __future__ import annotations

from typing import Any

import msgspec
from ezat_cli.audit_check import first_break
from ezat_common import audit


def chain(n: int) -> list[dict[str, Any]]:
    entries: list[audit.Entry] = []
    for i in range(n):
        entry = audit.Entry(
            seq=0,
            at=f"2026-12-05T00:00:0{i}.000000Z",
            actor="operator:op",
            action="team.update",
            target="team_1",
            before={"rpm": i},
            after={"rpm": i + 1},
        )
        entries.append(audit.chained(entries[-1] if entries else None, entry))
    return [msgspec.to_builtins(e) for e in entries]


def test_an_intact_chain_holds() -> None:
    assert first_break(chain(4)) is None
    assert first_break([]) is None


def test_a_changed_row_is_named() -> None:
    entries = chain(4)
    entries[2]["after"] = {"rpm": 2000}
    seq, why = first_break(entries) or (0, "")
    assert seq == 3 and why.startswith("its content no longer matches its hash")


def test_a_deleted_row_is_named_at_the_entry_after_it() -> None:
    entries = chain(4)
    del entries[1]
    seq, why = first_break(entries) or (0, "")
    assert seq == 3 and why.startswith("it does not follow the entry before it")
