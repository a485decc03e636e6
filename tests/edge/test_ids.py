"""Request ids and uids made by the edge: valid client ids kept, fresh ones random and unique."""

from __future__ import annotations

import uuid

from ezat_edge import ids


def test_a_valid_client_request_id_is_kept() -> None:
    assert ids.request_id("job-42:retry.1") == "job-42:retry.1"


def test_an_invalid_or_missing_client_request_id_is_replaced_by_a_uuid4() -> None:
    for header in (None, "", "has space", "x" * 129, "ünïcode"):
        made = ids.request_id(header)
        parsed = uuid.UUID(made)
        assert str(parsed) == made  # canonical lowercase 8-4-4-4-12 form
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122


def test_uids_are_128_bit_hex_and_never_repeat_across_pool_refills() -> None:
    # 20,000 ids span 78 refills of the 4 KiB random pool.
    uids = [ids.new_uid() for _ in range(20_000)]
    assert all(len(u) == 32 and int(u, 16) >= 0 for u in uids)
    assert len(set(uids)) == len(uids)
    fresh = [ids.request_id(None) for _ in range(20_000)]
    assert len(set(fresh)) == len(fresh)


def test_ids_are_not_sequential() -> None:
    # Random, not a counter: consecutive uids differ in about half of their 128 bits.
    a, b = int(ids.new_uid(), 16), int(ids.new_uid(), 16)
    assert 30 <= bin(a ^ b).count("1") <= 98
