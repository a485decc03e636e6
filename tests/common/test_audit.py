"""The audit chain (ezat_common/audit.py): hashes as docs/tenancy.md spells them, and verify
naming the seq where a changed, inserted or deleted entry breaks the chain."""

from __future__ import annotations

import datetime
import hashlib
import json

import msgspec
import pytest
from ezat_common import audit
from ezat_common.audit import GENESIS, Entry


def chain(n: int) -> list[Entry]:
    out: list[Entry] = []
    for i in range(n):
        draft = Entry(
            seq=0,
            at=f"2026-12-05T00:00:0{i}.000001Z",
            actor="operator:alice",
            action="key.update",
            target=f"key_{i}",
            before={"rpm": i, "name": "é"},
            after={"rpm": i + 1, "budget_usd": 0.1},
        )
        out.append(audit.chained(out[-1] if out else None, draft))
    return out


def test_the_hash_is_sha256_of_prev_hash_and_the_canonical_entry() -> None:
    first = chain(1)[0]
    body = {
        "seq": 1,
        "at": "2026-12-05T00:00:00.000001Z",
        "actor": "operator:alice",
        "action": "key.update",
        "target": "key_0",
        "before": {"rpm": 0, "name": "é"},
        "after": {"rpm": 1, "budget_usd": 0.1},
    }
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert first.prev_hash == GENESIS == "0" * 64
    assert first.hash == hashlib.sha256((GENESIS + text).encode()).hexdigest()
    assert b" " not in audit.canonical(first)


def test_entries_link_and_count_from_one() -> None:
    entries = chain(3)
    assert [e.seq for e in entries] == [1, 2, 3]
    assert entries[1].prev_hash == entries[0].hash and entries[2].prev_hash == entries[1].hash
    assert audit.verify(entries) == []
    assert audit.verify([]) == []


def test_at_is_utc_with_microseconds() -> None:
    tz = datetime.timezone(datetime.timedelta(hours=2))
    assert audit.at_text(datetime.datetime(2026, 1, 2, 5, 4, 5, tzinfo=tz)) == (
        "2026-01-02T03:04:05.000000Z"
    )


def _changed(entries: list[Entry], i: int, **fields: object) -> list[Entry]:
    out = list(entries)
    out[i] = msgspec.structs.replace(out[i], **fields)
    return out


@pytest.mark.parametrize(
    ("tamper", "bad"),
    [
        (lambda es: _changed(es, 1, after={"rpm": 999}), [2]),
        (lambda es: _changed(es, 0, actor="operator:mallory"), [1]),
        (lambda es: _changed(es, 2, at="2026-12-05T00:00:09.000001Z"), [3]),
        (lambda es: _changed(es, 1, before=None), [2]),
        (lambda es: es[:1] + es[2:], [3]),  # a deleted entry: the next one no longer follows
        (lambda es: es[1:], [2]),  # the first one deleted
        (lambda es: [es[1], es[0], *es[2:]], [2, 1, 3]),  # reordered
    ],
    ids=["after", "actor", "at", "before", "deleted", "first-deleted", "reordered"],
)
def test_verify_names_the_seq_where_the_chain_breaks(tamper, bad) -> None:  # type: ignore[no-untyped-def]
    assert audit.verify(tamper(chain(4))) == bad


def test_a_rehashed_change_is_caught_at_the_next_entry() -> None:
    entries = _changed(chain(3), 1, after={"rpm": 999})
    entries[1] = msgspec.structs.replace(
        entries[1], hash=audit.entry_hash(entries[1].prev_hash, entries[1])
    )
    assert audit.verify(entries) == [3]
